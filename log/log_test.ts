/** Structured log lines, with secrets redacted. */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { createLogger, formatLogLine } from "./log.ts";

Deno.test("log: JSON lines with every known secret redacted", () => {
  const at = new Date(0);
  const line = formatLogLine(at, "warn", "agent", "oops", { url: "x?t=secret-token-1" }, [
    "secret-token-1",
    "short",
  ]);
  assertEquals(JSON.parse(line), {
    ts: "1970-01-01T00:00:00.000Z",
    level: "warn",
    component: "agent",
    msg: "oops",
    url: "x?t=[redacted]",
  });
  const lines: string[] = [];
  const log = createLogger("c", (l) => lines.push(l), () => ["another-secret"]);
  log.info("with another-secret inside", { n: 1n as unknown as number });
  assertOk(lines.length === 1 && !lines[0].includes("another-secret"));
});
