/** Wire format errors: one line naming each path, the first few listed and the rest counted. */
import { z } from "zod";
import { assertEquals, assertThrows } from "../tests/assert.ts";
import { formatWireIssue, parseWire, WireFormatError } from "./wire_error.ts";

Deno.test("formatWireIssue: path, what it is about, message", () => {
  assertEquals(formatWireIssue({ path: ["a", 0, "b"], message: "bad" }), "a[0].b: bad");
  assertEquals(
    formatWireIssue({ path: ["shards", 2, "id"], about: 'shard "x"', message: "bad" }),
    'shards[2].id (shard "x"): bad',
  );
  assertEquals(formatWireIssue({ path: [], message: "bad" }), "(top level): bad");
});

Deno.test("parseWire: returns the parsed value or lists three issues and counts the rest", () => {
  const schema = z.object({ a: z.number(), b: z.number(), c: z.number(), d: z.number() });
  assertEquals(parseWire(schema, { a: 1, b: 2, c: 3, d: 4, e: 5 }, "it"), {
    a: 1,
    b: 2,
    c: 3,
    d: 4,
  });
  const e = assertThrows(
    () => parseWire(schema, {}, "the thing"),
    WireFormatError,
  ) as WireFormatError;
  assertEquals(e.issues.length, 4);
  assertEquals(e.what, "the thing");
  assertEquals(
    e.message,
    "Cannot use the thing: a: Invalid input: expected number, received undefined; " +
      "b: Invalid input: expected number, received undefined; " +
      "c: Invalid input: expected number, received undefined; and 1 more",
  );
  assertEquals(e.message, `Cannot use the thing: ${e.detail}`);
});
