/**
 * The one comparison of deployment specs (design §6.3): each spec is read
 * back through the schema with every default applied, then compared field by
 * field, so neither key order (a spec `llmgw dev` parsed before sending it,
 * a hand-edited file) nor a default written out or left implicit makes two
 * equal specs differ. Pure: `apply`, `rollout undo`, the rollout step and the
 * dry run all decide "what changed, and does it roll replicas" here.
 *
 * @module
 */
import type { SpecChange } from "../protocol/apply_answer.ts";
import { formatPath } from "../validation/issues.ts";
import { withDefaults } from "./load.ts";
import { modelRevision } from "./model_revision.ts";
import { DEFAULT_PROGRESS_DEADLINE_SECONDS, DEFAULT_ROUTING, type Deployment } from "./schema.ts";

export type { SpecChange };

/**
 * Top-level fields that change how many replicas run, how gateways pick one,
 * how a change replaces them or whether agents may evict the model's files
 * (`pinned`), never what a replica runs: a change to these alone makes no
 * revision and restarts nothing. Every other field (model, its revision,
 * served name, placement, profiles) is the workload.
 */
export const SETTINGS_FIELDS: ReadonlySet<string> = new Set([
  "replicas",
  "routing",
  "rollout",
  "pinned",
]);

/**
 * A spec in canonical form: read back through the schema with its defaults
 * (a stored spec from an older schema gains the fields it lacked), the
 * defaults applied where they are used filled in (`routing`, the rollout
 * deadline, a hub model's revision `main`, `pinned`), and every object's
 * keys sorted.
 */
export function canonicalSpec(d: Deployment): Deployment {
  let full: Deployment;
  try {
    full = withDefaults(d, "stored spec");
  } catch {
    // A spec stored under rules since tightened: compared as it is.
    full = d;
  }
  return sortKeys({
    ...full,
    revision: modelRevision(full.model, full.revision),
    pinned: full.pinned ?? false,
    routing: full.routing ?? DEFAULT_ROUTING,
    rollout: {
      ...full.rollout,
      progress_deadline_seconds: full.rollout?.progress_deadline_seconds ??
        DEFAULT_PROGRESS_DEADLINE_SECONDS,
    },
  }) as Deployment;
}

/**
 * Every field that differs from `live` to `next`, both in canonical form,
 * in path order. Objects are compared key by key whatever their order;
 * lists of objects (profiles) item by item; a list of plain values (engine
 * arguments) is one value, since its order is its meaning.
 */
export function specChanges(live: Deployment, next: Deployment): SpecChange[] {
  const out: SpecChange[] = [];
  diff(canonicalSpec(live), canonicalSpec(next), [], out);
  return out;
}

/** True when the field at `path` is a workload field: changing it makes a new revision. */
export function rollsReplicas(path: readonly (string | number)[]): boolean {
  return !SETTINGS_FIELDS.has(String(path[0]));
}

function diff(a: unknown, b: unknown, path: (string | number)[], out: SpecChange[]): void {
  if (isRecord(a) && isRecord(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const k of keys) diff(a[k], b[k], [...path, k], out);
    return;
  }
  if (Array.isArray(a) && Array.isArray(b) && [...a, ...b].some(isRecord)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) diff(a[i], b[i], [...path, i], out);
    return;
  }
  if (equal(a, b)) return;
  out.push({
    path: formatPath(path),
    ...(a === undefined ? {} : { from: a }),
    ...(b === undefined ? {} : { to: b }),
    rolls: rollsReplicas(path),
  });
}

/** Structural equality of decoded JSON values; an absent key equals an undefined one. */
function equal(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length &&
      a.every((x, i) => equal(x, b[i]));
  }
  if (isRecord(a) && isRecord(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].every((k) => equal(a[k], b[k]));
  }
  return Object.is(a, b);
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** A copy with every object's keys in sorted order and undefined values dropped. */
function sortKeys(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(sortKeys);
  if (!isRecord(x)) return x;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(x).sort()) {
    if (x[k] !== undefined) out[k] = sortKeys(x[k]);
  }
  return out;
}

/**
 * `workload`'s spec with `settings`' replica count, pin, routing and rollout
 * settings: what `rollout undo` and a revert bring back. The settings are
 * the operator's latest word, never part of a revision.
 */
export function withSettingsOf(workload: Deployment, settings: Deployment): Deployment {
  const { routing: _routing, rollout: _rollout, pinned: _pinned, ...rest } = workload;
  return {
    ...rest,
    replicas: settings.replicas,
    ...(settings.pinned === undefined ? {} : { pinned: settings.pinned }),
    ...(settings.routing === undefined ? {} : { routing: settings.routing }),
    ...(settings.rollout === undefined ? {} : { rollout: settings.rollout }),
  };
}
