/**
 * Which source the next chunk asks (issue #25 item 3): the assignment read
 * now, failed sources after the others, refused ones skipped; a failure
 * moves its source once; a mismatch moves the sources that served it.
 */
import { assertEquals } from "../../tests/assert.ts";
import {
  afterFailure,
  afterMismatch,
  keepAssigned,
  nextSource,
  sourceOrder,
} from "./source_order.ts";

const named = (...names: string[]) => names.map((name) => ({ name }));
const names = (sources: readonly { name: string }[]) => sources.map((s) => s.name);

Deno.test("sourceOrder: the assignment's order, failed sources last in failure order", () => {
  const cases: [string, string[], string[], string[]][] = [
    ["nothing failed", ["peer a", "hub"], [], ["peer a", "hub"]],
    ["the head failed", ["peer a", "hub"], ["peer a"], ["hub", "peer a"]],
    ["oldest failure first", ["peer a", "peer b", "hub"], ["hub", "peer a"], [
      "peer b",
      "hub",
      "peer a",
    ]],
    // A re-plan while downloading from the hub: the new peer is asked first.
    ["a peer assigned ahead", ["peer a", "hub"], [], ["peer a", "hub"]],
    ["a failed source no longer assigned", ["hub"], ["peer a"], ["hub"]],
    ["nothing assigned", [], ["peer a"], []],
  ];
  for (const [what, assigned, failed, want] of cases) {
    assertEquals(names(sourceOrder(named(...assigned), failed)), want, what);
  }
});

Deno.test("nextSource: the first in order that did not refuse the file", () => {
  const cases: [string, string[], string[], string[], string | undefined][] = [
    ["the head", ["peer a", "hub"], [], [], "peer a"],
    ["the head refused", ["peer a", "hub"], [], ["peer a"], "hub"],
    ["the head failed", ["peer a", "hub"], ["peer a"], [], "hub"],
    ["failed and refused", ["peer a", "hub"], ["peer a"], ["hub"], "peer a"],
    ["every one refused", ["peer a", "hub"], [], ["peer a", "hub"], undefined],
    // Removed from the plan (silent, gone): never asked, even when all others refused.
    ["the only one left refused", ["hub"], [], ["hub"], undefined],
  ];
  for (const [what, assigned, failed, refused, want] of cases) {
    assertEquals(nextSource(named(...assigned), failed, new Set(refused))?.name, want, what);
  }
});

Deno.test("afterFailure: the head moves last once; another source stays where it is", () => {
  const assigned = named("peer a", "peer b", "hub");
  const cases: [string, string[], string, string[]][] = [
    ["the head failed", [], "peer a", ["peer a"]],
    // A second chunk failing on it after the first moved it: no second move.
    ["already moved", ["peer a"], "peer a", ["peer a"]],
    ["not the head", [], "hub", []],
    ["the next head failed too", ["peer a"], "peer b", ["peer a", "peer b"]],
    ["all around: the first failed is the head again", ["peer a", "peer b", "hub"], "peer a", [
      "peer b",
      "hub",
      "peer a",
    ]],
    ["memory of an unassigned source dropped", ["peer x"], "peer a", ["peer a"]],
  ];
  for (const [what, failed, name, want] of cases) {
    assertEquals(afterFailure(assigned, failed, name), want, what);
  }
});

Deno.test("afterMismatch: the sources that served the rejected bytes go last, in order", () => {
  const assigned = named("peer a", "peer b", "hub");
  assertEquals(afterMismatch(assigned, [], new Set(["hub", "peer a"])), ["peer a", "hub"]);
  assertEquals(names(sourceOrder(assigned, ["peer a", "hub"])), ["peer b", "peer a", "hub"]);
  assertEquals(afterMismatch(assigned, ["peer a"], new Set(["peer b"])), ["peer a", "peer b"]);
  assertEquals(keepAssigned(assigned, ["peer x", "hub"]), ["hub"]);
});
