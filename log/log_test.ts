/** Structured log lines, with secrets redacted. */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { createLogger, formatLogLine, lineSink } from "./log.ts";

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

Deno.test("lineSink: a service's note lines become JSON lines at one level", () => {
  const lines: string[] = [];
  const note = lineSink(createLogger("gateway", (l) => lines.push(l)), "warn");
  note('cannot poll the control plane at https://c:7070 ("refused")');
  assertEquals(lines.length, 1);
  const v = JSON.parse(lines[0]);
  assertEquals([v.level, v.component, v.msg], [
    "warn",
    "gateway",
    'cannot poll the control plane at https://c:7070 ("refused")',
  ]);
  assertOk(typeof v.ts === "string");
});
