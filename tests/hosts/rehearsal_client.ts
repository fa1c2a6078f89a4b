/**
 * The rehearsal's client (issue #14), run inside a lab host with
 * `deno run --allow-net --allow-read --no-config rehearsal_client.ts …`:
 *
 * - `chat URL CA_FILE KEY_FILE MODEL COUNT INTERVAL_MS TIMEOUT_MS`: COUNT
 *   chat completions to URL, one every INTERVAL_MS (pacing, so a burst spans
 *   a fault), each bounded by TIMEOUT_MS, trusting only the CA in CA_FILE.
 *   Prints one JSON line per request (`{"i", "status", "ms"}` or
 *   `{"i", "error", "ms"}`) and a last line `{"ok": N, "failed": M}`.
 * - `probe URL CA_FILE|- TIMEOUT_MS`: one GET, trusting only CA_FILE (`-`:
 *   the system's roots; with an `http:` URL, none). Prints `{"status"}` or
 *   `{"error"}`.
 *
 * Exits 0 when it could run (the caller judges the answers), 2 on bad usage.
 * No imports: it starts fast from any directory.
 *
 * @module
 */

function usage(): never {
  console.error(
    "usage: rehearsal_client.ts chat URL CA_FILE KEY_FILE MODEL COUNT INTERVAL_MS TIMEOUT_MS\n" +
      "       rehearsal_client.ts probe URL CA_FILE|- TIMEOUT_MS",
  );
  Deno.exit(2);
}

function count(text: string | undefined, what: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`rehearsal_client.ts: ${what} must be an integer in ${min}…${max}, got ${text}`);
    Deno.exit(2);
  }
  return n;
}

function errorText(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause instanceof Error ? `: ${e.cause.message}` : "";
  return `${e.name}: ${e.message}${cause}`;
}

function clientFor(caFile: string): Deno.HttpClient | undefined {
  return caFile === "-" ? undefined : Deno.createHttpClient({
    caCerts: [Deno.readTextFileSync(caFile)],
  });
}

async function chat(args: string[]): Promise<void> {
  const [url, caFile, keyFile, model, n, interval, timeout] = args;
  if (timeout === undefined || args.length !== 7) usage();
  const total = count(n, "COUNT", 1, 10_000);
  const intervalMs = count(interval, "INTERVAL_MS", 0, 60_000);
  const timeoutMs = count(timeout, "TIMEOUT_MS", 1, 120_000);
  const key = Deno.readTextFileSync(keyFile).trim();
  const client = clientFor(caFile);
  let ok = 0;
  let failed = 0;
  for (let i = 0; i < total; i++) {
    const started = performance.now();
    const line: Record<string, unknown> = { i };
    try {
      const res = await fetch(url, {
        method: "POST",
        client,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: `hello ${i}` }] }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = await res.text();
      line.status = res.status;
      if (res.status === 200) ok++;
      else {
        failed++;
        line.body = body.slice(0, 300);
      }
    } catch (e) {
      failed++;
      line.error = errorText(e);
    }
    line.ms = Math.round(performance.now() - started);
    console.log(JSON.stringify(line));
    // Pacing, not a wait for a condition: the burst must span the fault under way.
    if (i + 1 < total) await new Promise((r) => setTimeout(r, intervalMs));
  }
  client?.close();
  console.log(JSON.stringify({ ok, failed }));
}

async function probe(args: string[]): Promise<void> {
  const [url, caFile, timeout] = args;
  if (timeout === undefined || args.length !== 3) usage();
  const timeoutMs = count(timeout, "TIMEOUT_MS", 1, 120_000);
  const client = clientFor(caFile);
  try {
    const res = await fetch(url, { client, signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    console.log(JSON.stringify({ status: res.status }));
  } catch (e) {
    console.log(JSON.stringify({ error: errorText(e) }));
  } finally {
    client?.close();
  }
}

if (import.meta.main) {
  const [mode, ...rest] = Deno.args;
  if (mode === "chat") await chat(rest);
  else if (mode === "probe") await probe(rest);
  else usage();
}
