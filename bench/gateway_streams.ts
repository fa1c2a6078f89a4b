/**
 * Gateway memory with many concurrent open streams (design §16: thousands of
 * concurrent streams). Starts the fake engine (long, slow streams) and the
 * gateway as processes, opens N streaming chat completions through the
 * gateway, waits until each has delivered its first chunk, and reads the
 * gateway's resident memory from /proc before and while they are open.
 *
 * Run: `deno run -A bench/gateway_streams.ts [N]` (default 5000).
 */
const N = Number(Deno.args[0] ?? 5000);
const ENGINE = 19501;
const GATEWAY = 19502;
const root = new URL("../", import.meta.url).pathname;

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

async function waitUp(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/v1/models`);
      await r.body?.cancel();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`port ${port} never answered`);
}

const engine = new Deno.Command(`${root}testing/bin/vllm`, {
  args: [
    "serve",
    "org/bench",
    "--served-model-name",
    "bench",
    "--host",
    "127.0.0.1",
    "--port",
    String(ENGINE),
    "--tensor-parallel-size",
    "1",
    "--pipeline-parallel-size",
    "1",
    "--max-num-seqs",
    "1000000",
  ],
  env: {
    FAKE_ENGINE_LOAD_SECONDS: "0",
    FAKE_ENGINE_TOKENS: "600",
    FAKE_ENGINE_TOKEN_DELAY_MS: "100",
    FAKE_ENGINE_ACCESS_LOG: "0",
  },
  stdout: "null",
  stderr: "null",
  detached: true,
}).spawn();
const gateway = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "-A",
    `${root}bench/gateway_fixed.ts`,
    String(GATEWAY),
    `http://127.0.0.1:${ENGINE}`,
  ],
  stdout: "null",
  stderr: "null",
  detached: true,
}).spawn();
const aborts: AbortController[] = [];
try {
  await waitUp(ENGINE);
  await waitUp(GATEWAY);
  const idle = rssMiB(gateway.pid);
  let open = 0;
  const body = JSON.stringify({
    model: "bench",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  });
  await Promise.all(Array.from({ length: N }, async () => {
    const ac = new AbortController();
    aborts.push(ac);
    const res = await fetch(`http://127.0.0.1:${GATEWAY}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read(); // the first chunk: the stream is open end to end
    open++;
    // Keep reading in the background so the stream stays live.
    (async () => {
      try {
        while (!(await reader.read()).done) { /* drain */ }
      } catch {
        // Aborted at the end.
      }
    })();
  }));
  await new Promise((r) => setTimeout(r, 2000));
  const loaded = rssMiB(gateway.pid);
  console.log(
    `| ${N} | ${open} | ${idle.toFixed(0)} MiB | ${loaded.toFixed(0)} MiB | ${
      ((loaded - idle) * 1024 / N).toFixed(1)
    } KiB |`,
  );
} finally {
  for (const a of aborts) a.abort();
  for (const p of [engine, gateway]) {
    try {
      Deno.kill(-p.pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
  await Promise.all([engine.status, gateway.status]);
}
