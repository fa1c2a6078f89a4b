/**
 * A pull's failure in words (review of issue #25 follow-up, ops item 6): the
 * agent's words may carry a hub's `X-Error-Message`, so terminal escapes
 * and control characters never reach a terminal, and a list's cell cuts
 * them while describe keeps them whole.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import type { ModelHostView } from "./model_admin.ts";
import { failureWhy, hostState, WHY_IN_LIST } from "./model_revision_text.ts";

Deno.test("failureWhy: escape sequences dropped, other C0/C1 controls a space, nothing else changed", () => {
  const hub = "\u001b[31mmodel acme/x is gated\u001b[0m:\u0007 ask\tfor access\r\n" +
    "\u001b]0;pwned\u0007title\u009b2Jcleared\u0085end\u007f";
  assertEquals(
    failureWhy("gated", hub),
    "gated: model acme/x is gated: ask for access titlecleared end",
  );
  assertEquals(failureWhy(undefined, "\u001b[2J"), "");
  assertEquals(failureWhy("fetch_failed", null), "fetch_failed");
  assertEquals(
    failureWhy("k", "ünïcode — “quoted” 漢字 stays"),
    "k: ünïcode — “quoted” 漢字 stays",
  );
  for (let c = 0; c < 0x100; c++) {
    const why = failureWhy("k", `a${String.fromCharCode(c)}b`);
    const control = [...why].some((ch) =>
      ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) >= 0x7f && ch.charCodeAt(0) < 0xa0
    );
    assertOk(!control, `U+${c.toString(16)} passed: ${why}`);
  }
});

Deno.test("hostState: a list cuts the failure's words at a word; without a bound they stay whole", () => {
  const message = "hub https://hub.example answered 403 for model-00001-of-00004.safetensors: " +
    "x".repeat(300) + " and more";
  const h: ModelHostView = {
    node: "n1",
    state: "failed",
    bytes_done: 0,
    bytes: null,
    last_used: null,
    failure: { kind: "gated", message, at: 1 },
  };
  const cell = hostState(h, WHY_IN_LIST);
  assertOk(cell.startsWith("failed (gated: hub https://hub.example answered 403"), cell);
  assertOk(cell.endsWith("…)"), cell);
  assertOk([...cell].length <= WHY_IN_LIST + "failed ()".length, `${[...cell].length}`);
  assertEquals(hostState(h), `failed (gated: ${message})`);
  assertEquals(hostState({ ...h, failure: undefined }, WHY_IN_LIST), "failed");
});
