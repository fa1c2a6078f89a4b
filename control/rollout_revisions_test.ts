import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { deploymentSpec, storedDeployment } from "../tests/store_records.ts";
import {
  MAX_REVISIONS,
  nextRevision,
  pruneHistory,
  revisionSpec,
  sameWorkload,
  undoTarget,
} from "./rollout_revisions.ts";
import type { DeploymentRevision } from "./store/store.ts";

function revision(n: number, args: string[] = []): DeploymentRevision {
  const spec = deploymentSpec("llama");
  spec.profiles[0].engine_args = args;
  return {
    revision: n,
    spec,
    applied_at: n,
    cause: "apply",
    from_revision: null,
    outcome: "complete",
    reason: null,
  };
}

Deno.test("sameWorkload: the replica count, routing and rollout settings are not the workload (table)", () => {
  const base = deploymentSpec("llama");
  const cases: [string, Partial<typeof base>, boolean][] = [
    ["identical", {}, true],
    ["replicas", { replicas: 9 }, true],
    ["rollout settings", { rollout: { progress_deadline_seconds: 5 } }, true],
    // Gateways read routing from the live spec: no engine needs a restart for it.
    ["routing", { routing: "random" }, true],
    ["model", { model: "org/other" }, false],
    ["placement", { placement: "spread" }, false],
    ["engine args", { profiles: [{ ...base.profiles[0], engine_args: ["--x"] }] }, false],
  ];
  for (const [title, change, same] of cases) {
    assertEquals(sameWorkload(base, { ...base, ...change }), same, title);
  }
});

Deno.test("a record from before revisions: its spec is revision 1; the next is 2", () => {
  const d = storedDeployment("llama");
  delete d.revision;
  delete d.history;
  assertEquals(revisionSpec(d, 1), d.spec);
  assertEquals(revisionSpec(d, 2), undefined);
  assertEquals(nextRevision(d), 2);
  assertEquals(undoTarget(d), undefined);
});

Deno.test("undoTarget: the newest earlier revision that runs something else", () => {
  const d = {
    ...storedDeployment("llama"),
    revision: 4,
    history: [revision(1, ["--a"]), revision(2, ["--b"]), revision(3), revision(4)],
  };
  d.spec = revision(4).spec;
  // Revision 3 runs what 4 runs: undo skips it.
  assertEquals(undoTarget(d)?.revision, 2);
});

Deno.test("pruneHistory (property): the newest MAX_REVISIONS and every kept one, oldest first", () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.integer({ min: 1, max: 60 }), { maxLength: 40 }),
      fc.array(fc.integer({ min: 1, max: 60 }), { maxLength: 5 }),
      (numbers, keep) => {
        const out = pruneHistory(numbers.map((n) => revision(n)), new Set(keep)).map((h) =>
          h.revision
        );
        const sorted = [...numbers].sort((a, b) => a - b);
        const newest = sorted.slice(-MAX_REVISIONS);
        assertEquals(out, sorted.filter((n) => newest.includes(n) || keep.includes(n)));
        assertOk(out.length <= MAX_REVISIONS + keep.length);
      },
    ),
    { numRuns: 300 },
  );
});
