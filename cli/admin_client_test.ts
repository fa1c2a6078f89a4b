/** Admin answers: parsed with their schema, printed in the control plane's key order. */
import { z } from "zod";
import { assertEquals, assertRejects } from "../tests/assert.ts";
import { adminAnswer, AdminError, inOrderOf } from "./admin_client.ts";

const Answer = z.object({
  a: z.number(),
  nested: z.looseObject({ x: z.string(), y: z.string() }),
  list: z.array(z.object({ p: z.number(), q: z.number() })),
  later: z.string().default(""),
});

Deno.test("adminAnswer: keeps the answer's key order, fills defaults last", async () => {
  const raw = { list: [{ q: 2, p: 1 }], nested: { y: "y", extra: true, x: "x" }, a: 1 };
  const got = await adminAnswer(() => Promise.resolve(raw), Answer, "GET", "/v1/x");
  assertEquals(JSON.stringify(got), JSON.stringify({ ...raw, later: "" }));
});

Deno.test("adminAnswer: an answer that does not match is an AdminError naming the call and field", async () => {
  const e = await assertRejects(
    () => adminAnswer(() => Promise.resolve({ a: "1" }), Answer, "GET", "/v1/x"),
    AdminError,
  );
  assertEquals(e.message.startsWith("Cannot use the answer to GET /v1/x: a: "), true, e.message);
});

Deno.test("inOrderOf: values are the parsed ones, whatever the raw holds", () => {
  assertEquals(inOrderOf({ b: "raw", a: 1 }, { a: 1, b: "parsed" }), { b: "parsed", a: 1 });
  assertEquals(inOrderOf(null, { a: 1 }), { a: 1 });
});
