/**
 * A one-shot HTTP GET for lab tests: `fetch_probe.ts URL TIMEOUT_MS` prints
 * `STATUS BODY` and exits 0 when a response came, or prints the error and
 * exits 1 when none came within TIMEOUT_MS (refused, unreachable, timed
 * out). Run inside a lab host with `deno run --allow-net fetch_probe.ts …`.
 *
 * @module
 */

if (import.meta.main) {
  const [url, timeoutText, ...rest] = Deno.args;
  const timeoutMs = Number(timeoutText);
  if (url === undefined || rest.length > 0) {
    console.error("usage: fetch_probe.ts URL TIMEOUT_MS");
    Deno.exit(2);
  }
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    console.error(
      `Cannot probe ${url}: TIMEOUT_MS must be a positive integer, got ${
        JSON.stringify(timeoutText)
      }`,
    );
    Deno.exit(2);
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    console.log(`${res.status} ${await res.text()}`);
  } catch (e) {
    console.log(`no response: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    Deno.exit(1);
  }
}
