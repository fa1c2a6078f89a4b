import { assertEquals, assertOk } from "../tests/assert.ts";
import { chatTrace, turnMessages } from "./chat_trace.ts";

Deno.test("chatTrace: seeded, sorted by start, chat and agent sessions behind shared system prompts", () => {
  const a = chatTrace({ sessions: 50, seed: 3 });
  assertEquals(chatTrace({ sessions: 50, seed: 3 }), a);
  assertOk(JSON.stringify(chatTrace({ sessions: 50, seed: 4 })) !== JSON.stringify(a));
  for (let i = 1; i < a.length; i++) assertOk(a[i].startMs >= a[i - 1].startMs);
  const kinds = new Set(a.map((s) => s.kind));
  assertEquals(kinds.size, 2);
  assertEquals(new Set(a.map((s) => s.system)).size, 2, "two shared system prompts");
  // First user messages differ between sessions: affinity keys spread.
  assertEquals(new Set(a.map((s) => s.turns[0].user)).size, a.length);
});

Deno.test("turnMessages: each turn is the history so far plus the new user turn", () => {
  const [s] = chatTrace({ sessions: 1 });
  const t0 = turnMessages(s, 0);
  assertEquals(t0.map((m) => m.role), ["system", "user"]);
  const t1 = turnMessages(s, 1);
  assertEquals(t1.map((m) => m.role), ["system", "user", "assistant", "user"]);
  assertEquals(t1.slice(0, 2), t0, "a later turn starts with the earlier one");
});
