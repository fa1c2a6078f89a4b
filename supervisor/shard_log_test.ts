import { join } from "node:path";
import { assertEquals } from "../tests/assert.ts";
import { ShardLog } from "./shard_log.ts";

Deno.test("ShardLog: follows the file, scrubs before keeping, hands each line on once, rotates", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-shard-log-" });
  try {
    const path = join(dir, "engine.log");
    const seen: string[] = [];
    const log = new ShardLog({
      tailLimits: { maxLines: 10, maxBytes: 1_000 },
      maxBytes: 40,
      keep: 1,
      scrub: (t) => t.replaceAll("sk-secret", "***"),
      onLine: (l) => seen.push(l),
    });
    Deno.writeTextFileSync(path, "from a previous run\n", { mode: 0o644 });
    Deno.chmodSync(path, 0o644);
    log.followFromEnd(path);
    // An older agent's log is narrowed (SGLang prints its key there), and kept.
    assertEquals(Deno.statSync(path).mode! & 0o777, 0o600);
    assertEquals(Deno.readTextFileSync(path), "from a previous run\n");
    Deno.writeTextFileSync(path, "key sk-secret\nhalf", { append: true });
    log.read();
    assertEquals(log.last(10), ["key ***"]);
    Deno.writeTextFileSync(path, " line\n" + "x".repeat(40) + "\n", { append: true });
    // Past 40 bytes: drained, copied to engine.log.1, truncated, followed from its start.
    assertEquals(log.rotate(), path);
    assertEquals(Deno.readTextFileSync(path), "");
    Deno.writeTextFileSync(path, "after\n", { append: true });
    log.read();
    assertEquals(seen, ["key ***", "half line", "x".repeat(40), "after"]);
    assertEquals(log.window().lines, seen);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ShardLog: llmgw's probe lines stay in the file, out of the tail, and are counted", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-shard-log-" });
  try {
    const path = join(dir, "engine.log");
    const log = new ShardLog({
      tailLimits: { maxLines: 3, maxBytes: 10_000 },
      maxBytes: 1_000_000,
      keep: 1,
      scrub: (t) => t,
      onLine: () => {},
    });
    log.followFromEnd(path);
    // A vLLM log as a probed shard writes it: probes every few seconds, one real request.
    const probes = [
      '(APIServer pid=41) INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK',
      '(APIServer pid=41) INFO:     127.0.0.1:43212 - "GET /v1/models HTTP/1.1" 200 OK',
      '(APIServer pid=41) INFO:     127.0.0.1:43214 - "GET /metrics HTTP/1.1" 200 OK',
    ];
    const text = [
      "(APIServer pid=41) INFO 05-06 21:00:52 [api_server.py:602] Starting vLLM server",
      ...probes,
      ...probes,
      '(APIServer pid=41) INFO:     127.0.0.1:43220 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
      ...probes,
      '(APIServer pid=41) INFO:     127.0.0.1:43222 - "GET /health HTTP/1.1" 503 Service Unavailable',
      ...probes,
    ].join("\n") + "\n";
    Deno.writeTextFileSync(path, text, { append: true });
    log.read();
    const w = log.window();
    assertEquals(w.lines, [
      "(APIServer pid=41) INFO 05-06 21:00:52 [api_server.py:602] Starting vLLM server",
      '(APIServer pid=41) INFO:     127.0.0.1:43220 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
      '(APIServer pid=41) INFO:     127.0.0.1:43222 - "GET /health HTTP/1.1" 503 Service Unavailable',
    ]);
    assertEquals([w.first, w.probe_lines_hidden], [0, 12]);
    assertEquals(log.last(3), w.lines);
    // The file on disk keeps every line.
    assertEquals(Deno.readTextFileSync(path), text);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ShardLog: an adopted run's log and its rotated copies, an older agent's 0644, are narrowed to 0600", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-shard-log-" });
  try {
    const path = join(dir, "engine.log");
    for (const p of [path, `${path}.1`, `${path}.2`]) {
      Deno.writeTextFileSync(p, "server_args=ServerArgs(api_key='k')\n");
      Deno.chmodSync(p, 0o644);
    }
    const log = new ShardLog({
      tailLimits: { maxLines: 10, maxBytes: 1_000 },
      maxBytes: 1_000_000,
      keep: 2,
      scrub: (t) => t.replaceAll("'k'", "***"),
      onLine: () => {},
    });
    log.followRecent(path, 1_000);
    for (const p of [path, `${path}.1`, `${path}.2`]) {
      assertEquals(Deno.statSync(p).mode! & 0o777, 0o600, p);
    }
    assertEquals(log.last(1), ["server_args=ServerArgs(api_key=***)"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
