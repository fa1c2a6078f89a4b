/**
 * Identities of incarnations (issue #23): a deployment or replica deleted
 * and created again under the same name is another object, and its events
 * must not show its predecessor's failures. Each incarnation gets a `uid` when
 * it is created; each event stores the `uid` of the incarnation it is about,
 * and reads of one subject's events default to its current incarnation.
 *
 * Nodes have none: a node's id names a machine, and its history (lost,
 * drained, rejoined) is that machine's history, across re-registrations.
 *
 * @module
 */
import type { StoredDeployment, StoredReplica } from "./store/store.ts";

/** A fresh identity for a new incarnation. */
export function newUid(): string {
  return crypto.randomUUID();
}

/** The books a subject's identity is looked up in. */
export interface IdentityBooks {
  /** Deployments by name. */
  deployments: ReadonlyMap<string, Pick<StoredDeployment, "uid">>;
  /** Replicas by id. */
  replicas: ReadonlyMap<string, Pick<StoredReplica, "uid">>;
}

/**
 * The uid a query of events keeps, or undefined for every event: with a
 * subject, `incarnation` "current" or absent keeps its current incarnation's
 * events (every one when it has no identities or is gone), "all" keeps every
 * incarnation's, and anything else is a uid; without a subject only a uid filters.
 */
export function incarnationFilter(
  books: IdentityBooks,
  subject: string | undefined,
  incarnation: string | undefined,
): string | undefined {
  if (incarnation === "all") return undefined;
  if (incarnation === undefined || incarnation === "current") {
    return subject === undefined ? undefined : currentUid(books, subject);
  }
  return incarnation;
}

/**
 * The identity of a subject's current incarnation (`deployment/NAME`,
 * `replica/ID`): "" for one from before identities; undefined when the
 * subject has no identities (nodes, tokens, keys) or does not exist now.
 */
export function currentUid(books: IdentityBooks, subject: string): string | undefined {
  const slash = subject.indexOf("/");
  if (slash < 0) return undefined;
  const kind = subject.slice(0, slash);
  const name = subject.slice(slash + 1);
  const record = kind === "deployment"
    ? books.deployments.get(name)
    : kind === "replica"
    ? books.replicas.get(name)
    : undefined;
  return record === undefined ? undefined : record.uid ?? "";
}
