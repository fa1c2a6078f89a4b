/** Structured log lines, with secrets redacted; retry delays with jitter. */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { createLogger, formatLogLine } from "./log.ts";
import { DEFAULT_RETRY, retryDelay, sleep } from "./retry.ts";

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

Deno.test("retry: capped exponential delays with equal jitter", async () => {
  assertEquals(retryDelay(1, DEFAULT_RETRY, () => 0), 500);
  assertEquals(retryDelay(1, DEFAULT_RETRY, () => 0.999999), 1_000);
  assertEquals(retryDelay(3, DEFAULT_RETRY, () => 0), 2_000);
  assertEquals(retryDelay(50, DEFAULT_RETRY, () => 0.999999), 30_000);
  const ctl = new AbortController();
  let woke = false;
  const slept = sleep(60_000, ctl.signal).then(() => woke = true);
  ctl.abort();
  // One turn of the event loop: only the abort can have ended a minute's sleep.
  await new Promise((resolve) => setTimeout(resolve, 0));
  assertOk(woke, "an abort ends the sleep");
  await slept;
});
