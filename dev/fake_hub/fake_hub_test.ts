import { assertEquals, assertOk, assertRejects } from "../../tests/assert.ts";
import { ModelsDirError, reposFromDir } from "./fake_hub_dir.ts";
import { inProcessFakeHub } from "./fake_hub_server.ts";

const PROGRAM = new URL("./fake_hub.ts", import.meta.url).pathname;

Deno.test("the program serves synthetic models with --no-config and stops on SIGTERM", async () => {
  const dir = await Deno.makeTempDir(); // an empty working directory: no deno.json to lean on
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-config", PROGRAM, "--synthetic", "org/x,shards=2,bytes=64KiB,gated"],
    cwd: dir,
    env: { FAKE_HUB_TOKENS: "hf_prog_token" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let line = "";
    for (let i = 0; i < 100 && !line.includes("\n"); i++) {
      const { done, value } = await reader.read();
      if (done) break;
      line += value;
    }
    const ready = JSON.parse(line);
    assertEquals(ready.fake_hub, "listening");
    assertEquals(ready.repos[0].id, "org/x");
    const refused = await fetch(`${ready.endpoint}/api/models/org/x`);
    assertEquals([refused.status, refused.headers.get("X-Error-Code")], [401, "GatedRepo"]);
    await refused.body?.cancel();
    const granted = await fetch(`${ready.endpoint}/api/models/org/x`, {
      headers: { Authorization: "Bearer hf_prog_token" },
    });
    assertEquals((await granted.json()).sha, ready.repos[0].commit);
    child.kill("SIGTERM");
    assertEquals((await child.status).code, 0);
    reader.releaseLock();
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await child.status;
    await child.stdout.cancel().catch(() => {});
    await child.stderr.cancel().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the program refuses a bad command line with exit 2 and the flag named", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-config", PROGRAM, "--port", "x"],
  }).output();
  assertEquals(out.code, 2);
  assertOk(new TextDecoder().decode(out.stderr).includes("fake_hub: --port needs a port"));
});

Deno.test("--models DIR serves each {org}/{name}/ directory as a repo", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/org/m/sub`, { recursive: true });
    await Deno.writeTextFile(`${dir}/org/m/config.json`, '{"model_type":"llama"}');
    await Deno.writeFile(
      `${dir}/org/m/sub/w.safetensors`,
      new Uint8Array(300_000).map((_, i) => i % 251),
    );
    const repos = await reposFromDir(dir);
    assertEquals(repos.map((r) => r.id), ["org/m"]);
    const files = repos[0].commits[repos[0].refs.main];
    assertEquals(files.map((f) => [f.path, f.size, f.sha256 !== undefined]), [[
      "config.json",
      22,
      false,
    ], ["sub/w.safetensors", 300_000, true]]);
    const hub = inProcessFakeHub({ repos });
    const r = await hub.fetch(`${hub.endpoint}/org/m/resolve/main/sub/w.safetensors`);
    const bytes = new Uint8Array(await r.arrayBuffer());
    assertEquals([bytes.byteLength, bytes[260]], [300_000, 260 % 251]);
    await assertRejects(
      () => reposFromDir(`${dir}/org/m/sub`),
      ModelsDirError,
      "has no {org}/{name}/ directory with files",
    );
    await assertRejects(
      () => reposFromDir(`${dir}/none`),
      ModelsDirError,
      "not a readable directory",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
