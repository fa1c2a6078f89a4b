/**
 * Everything one fake hub knows and counts, shared by its two listeners (the
 * hub and its CDN) and by the in-process fetch tests use.
 *
 * @module
 */
import type { Bandwidth } from "./fake_hub_bandwidth.ts";
import type { FakeHubCounters } from "./fake_hub_counters.ts";
import type { UrlSigner } from "./fake_hub_signing.ts";
import type { FakeFile, FakeRepo } from "./fake_repo.ts";

/** The state behind a fake hub's handlers. */
export interface FakeHubState {
  /** Repos by id. */
  repos: Map<string, FakeRepo>;
  /** Tokens of the hub's accounts; any other bearer token is invalid (401). */
  tokens: Set<string>;
  /** What was asked. */
  counters: FakeHubCounters;
  /** The origin's cap, hub and CDN together. */
  bandwidth: Bandwidth;
  /** Signs and checks CDN URLs. */
  signer: UrlSigner;
  /** False while switched off: bodies in flight break, in-process fetch is refused. */
  online: boolean;
  /** The hub's origin (`http://127.0.0.1:P`), for messages. */
  hubOrigin: string;
  /** The CDN's origin, for redirects. */
  cdnOrigin: string;
  /** Bodies being sent: switching off breaks each (a hub that vanishes mid-transfer). */
  sending: Set<ReadableStreamDefaultController<Uint8Array>>;
}

/** The LFS file whose content has `sha256`, in any repo. */
export function blobBySha(state: FakeHubState, sha256: string): FakeFile | undefined {
  for (const repo of state.repos.values()) {
    for (const files of Object.values(repo.commits)) {
      const file = files.find((f) => f.sha256 === sha256);
      if (file !== undefined) return file;
    }
  }
  return undefined;
}
