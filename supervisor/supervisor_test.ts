/** The supervisor's events in the agent's log: a file-mode warning is a warning. */
import { createLogger } from "../log/log.ts";
import { assertEquals } from "../tests/assert.ts";
import { logEvent } from "./supervisor.ts";

Deno.test("logEvent writes file_mode events as warnings and the others as info, with shard, kind and time", () => {
  const lines: string[] = [];
  const write = logEvent(createLogger("supervisor", (l) => lines.push(l)));
  write({ at: 1, shard: null, kind: "file_mode", message: "/s is 0755 and cannot be narrowed" });
  write({ at: 2, shard: "a", kind: "state", message: "ready" });
  const logged = lines.map((l) => JSON.parse(l));
  assertEquals(logged.map((l) => [l.level, l.msg, l.shard, l.kind, l.at]), [
    ["warn", "/s is 0755 and cannot be narrowed", null, "file_mode", 1],
    ["info", "ready", "a", "state", 2],
  ]);
});
