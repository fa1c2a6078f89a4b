import { assertEquals } from "../tests/assert.ts";
import { replicaState } from "./views.ts";

Deno.test("a replica's state: its phase, then the worst of its shards", () => {
  const cases: [string, "pending" | "placed" | "failed", string[], string][] = [
    ["pending", "pending", [], "pending"],
    ["given up", "failed", [], "failed"],
    ["all ready", "placed", ["ready", "ready"], "ready"],
    ["one failed", "placed", ["ready", "failed"], "failed"],
    ["one loading", "placed", ["loading", "ready"], "loading"],
    ["not reported yet", "placed", ["unknown", "ready"], "starting"],
    ["backing off", "placed", ["backoff"], "starting"],
    ["placed, no shards", "placed", [], "starting"],
  ];
  for (const [name, phase, states, want] of cases) {
    assertEquals(
      replicaState({ phase }, states.map((s) => ({ state: s as "ready" }))),
      want,
      name,
    );
  }
});
