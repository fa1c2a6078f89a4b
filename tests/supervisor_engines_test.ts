/**
 * The supervisor running the real vLLM and SGLang plugins' command lines
 * against the fake engine (dev/fake_engine/fake_engine.ts), which behaves like each
 * engine while loading (design §9.3): vLLM keeps its port closed and logs
 * progress; SGLang answers /health 503 until warm.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { EngineRegistry } from "../engines/registry.ts";
import { ENGINE_API_VERSION, type EngineApiKey, type ShardLaunch } from "../engines/types.ts";
import {
  groupMembers,
  type LaunchedShard,
  shardDirName,
  type ShardReport,
  Supervisor,
  type SupervisorEvent,
} from "../supervisor/mod.ts";

const SHIMS = fileURLToPath(new URL("../dev/fake_engine/bin", import.meta.url));

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function launch(id: string, port: number, gpus = 1): ShardLaunch {
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "demo",
    replica_id: id,
    shard_id: id,
    model: "org/demo-model",
    served_model_name: "demo",
    profile: {
      name: "p",
      tensor_parallel: gpus,
      pipeline_parallel: 1,
      nodes: 1,
      gpus_per_node: gpus,
      quantization: "none",
      engine_args: [],
      engine_options: {},
      env: {},
    },
    rank: 0,
    world: { nodes: 1, leader_addr: "127.0.0.1", rendezvous_port: 0, leader_http_port: port },
    gpus: Array.from({ length: gpus }, (_, index) => ({
      index,
      class: "l40s-45g",
      compute_capability: "8.9",
    })),
    fabric: null,
    node: { id: "n1", mgmt_addr: "127.0.0.1", mgmt_interface: "lo" },
    port,
    engine_version: null,
  };
}

/**
 * Runs `fn` against a supervisor of the real plugins. `apiKey`: the engine's
 * own way of taking its key, or another (an older agent's). `stateDir`, when
 * given, is the caller's to remove; `detach` leaves the engines running for
 * a next supervisor (once `fn` passed), their groups added to `groups`,
 * which the caller then stops.
 */
async function withEngines(
  env: Record<string, string>,
  options: {
    loadTimeoutMs?: number;
    apiKey?: boolean | EngineApiKey;
    stateDir?: string;
    detach?: boolean;
    groups?: Set<number>;
  },
  fn: (
    sup: Supervisor,
    events: SupervisorEvent[],
    groups: Set<number>,
    stateDir: string,
  ) => Promise<void>,
): Promise<void> {
  const registry = await EngineRegistry.load();
  const stateDir = options.stateDir ??
    await Deno.makeTempDir({ prefix: "llmgw_supervisor_engines_test_" });
  const events: SupervisorEvent[] = [];
  const groups = options.groups ?? new Set<number>();
  const sup = new Supervisor({
    stateDir,
    tickMs: 50,
    probeTimeoutMs: 500,
    stopGraceMs: 3_000,
    loadTimeoutMs: options.loadTimeoutMs ?? 30_000,
    env: { PATH: `${SHIMS}:${Deno.env.get("PATH")}`, FAKE_ENGINE_ACCESS_LOG: "0", ...env },
    onEvent: (e) => events.push(e),
  }, async (d: LaunchedShard) => {
    const driver = registry.get(d.engine)!;
    const spec = await driver.prepare(d.launch);
    // As the agent does (agent/prepare_shard.ts): the engine's way of taking its key.
    const key = options.apiKey === true ? driver.api_key : options.apiKey || undefined;
    return key ? { ...spec, api_key: key } : spec;
  });
  let passed = false;
  try {
    await sup.start();
    await fn(sup, events, groups, stateDir);
    passed = true;
  } finally {
    for (const s of sup.status()) if (s.pid !== null) groups.add(s.pid);
    if (passed && options.detach) {
      await sup.detach();
    } else {
      await sup.shutdown().catch(() => {});
      killGroups(groups);
    }
    if (options.stateDir === undefined) await Deno.remove(stateDir, { recursive: true });
  }
}

function killGroups(groups: Set<number>): void {
  for (const g of groups) {
    try {
      Deno.kill(-g, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}

/** Polls until `pred` holds for shard `id`'s status (20 s at most), noting every pid it sees. */
function shardReaches(
  sup: Supervisor,
  id: string,
  pred: (s: ShardReport) => boolean,
  groups: Set<number>,
  what: string,
): Promise<ShardReport> {
  return until(`${id} to reach ${what}`, () => {
    const s = sup.shard(id)?.status;
    if (s?.pid) groups.add(s.pid);
    return s !== undefined && pred(s) ? s : null;
  }, {
    timeoutMs: 20_000,
    intervalMs: 20,
    describe: () => `now ${JSON.stringify(sup.shard(id))}`,
  });
}

Deno.test("vLLM: starting, then loading from its log while the port is closed, then ready", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_LOAD_SECONDS: "1.5", FAKE_ENGINE_WORKER: "1" },
    {},
    async (sup, events, groups) => {
      await sup.reconcile([{ id: "v0", engine: "vllm", launch: launch("v0", port, 2) }]);
      const loading = await shardReaches(
        sup,
        "v0",
        (s) => s.state === "loading",
        groups,
        "loading",
      );
      assertOk(loading.progress !== null, "progress parsed from vLLM's log");
      // While loading, vLLM's port refuses connections.
      const refused = await fetch(`http://127.0.0.1:${port}/health`).then(() => false, () => true);
      assertOk(refused, "the port is closed while loading");
      const ready = await shardReaches(sup, "v0", (s) => s.state === "ready", groups, "ready");
      assertOk(ready.serves_http);
      const models = await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json();
      assertEquals(models.data[0].id, "demo");
      const transitions = events.filter((e) => e.shard === "v0" && e.kind === "state").map((e) =>
        e.message.split(":")[0]
      );
      assertEquals(transitions, ["pending → starting", "starting → loading", "loading → ready"]);
      assertStringIncludes(
        sup.shard("v0")!.log_tail.join("\n"),
        "Loading safetensors checkpoint shards",
      );
      // The engine forked a worker into its group; stopping leaves neither.
      const pid = ready.pid!;
      assertOk(groupMembers(pid).length >= 2, "leader and worker");
      await sup.reconcile([]);
      assertEquals(groupMembers(pid), []);
    },
  );
});

Deno.test("SGLang: the port answers 503 while warming (loading), then ready", async () => {
  const port = freePort();
  await withEngines({ FAKE_ENGINE_LOAD_SECONDS: "1.5" }, {}, async (sup, _events, groups) => {
    await sup.reconcile([{ id: "s0", engine: "sglang", launch: launch("s0", port) }]);
    await shardReaches(sup, "s0", (s) => s.state === "loading", groups, "loading");
    const health = await fetch(`http://127.0.0.1:${port}/health`).catch(() => null);
    if (health !== null) {
      await health.body?.cancel();
      assertEquals(health.status, 503);
    }
    const ready = await shardReaches(sup, "s0", (s) => s.state === "ready", groups, "ready");
    assertEquals(ready.last_failure, null);
  });
});

Deno.test("SGLang's API key: in a 0600 file its --config names, never in its argv, and required", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_LOAD_SECONDS: "0.3" },
    { apiKey: true },
    async (sup, _events, groups, stateDir) => {
      await sup.reconcile([{ id: "k0", engine: "sglang", launch: launch("k0", port) }]);
      // Ready: the supervisor's probes passed, sending the key.
      const ready = await shardReaches(sup, "k0", (s) => s.state === "ready", groups, "ready");
      const key = sup.target("k0")?.key;
      assertOk(typeof key === "string" && key.length >= 32, "the shard has its own key");
      const dir = join(stateDir, "shards", shardDirName("k0"));
      const file = join(dir, "engine_key.yaml");
      assertEquals(Deno.statSync(file).mode! & 0o777, 0o600);
      assertEquals(Deno.readTextFileSync(file), `"api-key": ${JSON.stringify(key)}\n`);
      // Its neighbours are owner-only too: SGLang prints the key in its log.
      const modes = [dir, join(dir, "engine.log"), join(dir, "pid.json")].map((p) =>
        Deno.statSync(p).mode! & 0o777
      );
      assertEquals(modes, [0o700, 0o600, 0o600]);
      // What `ps` shows every local user: the file's path, not the key.
      const argv = Deno.readTextFileSync(`/proc/${ready.pid}/cmdline`).split("\0");
      assertEquals(argv.slice(argv.indexOf("--config"), argv.indexOf("--config") + 2), [
        "--config",
        file,
      ]);
      assertOk(!argv.some((a) => a.includes(key)), "the key is not in the engine's argv");
      const models = (auth?: string) =>
        fetch(`http://127.0.0.1:${port}/v1/models`, {
          headers: auth === undefined ? {} : { authorization: `Bearer ${auth}` },
        }).then(async (r) => (await r.body?.cancel(), r.status));
      assertEquals(await models(), 401);
      assertEquals(await models("not-the-key"), 401);
      assertEquals(await models(key), 200);
    },
  );
});

Deno.test("an engine that never becomes ready fails its load with the log tail", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_NEVER_READY: "1" },
    { loadTimeoutMs: 1_500 },
    async (sup, _e, groups) => {
      await sup.reconcile([{ id: "stuck", engine: "vllm", launch: launch("stuck", port) }]);
      const s = await shardReaches(
        sup,
        "stuck",
        (x) => x.last_failure !== null,
        groups,
        "a failure",
      );
      assertStringIncludes(
        s.last_failure!.reason,
        "did not become ready within 1500 ms of loading",
      );
      assertStringIncludes(
        s.last_failure!.log_tail.join("\n"),
        "Loading safetensors checkpoint shards",
      );
    },
  );
});

Deno.test("an engine that crashes after serving restarts with backoff and keeps the reason", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_LOAD_SECONDS: "0.2", FAKE_ENGINE_CRASH_AFTER_REQUESTS: "1" },
    {},
    async (sup, _e, groups) => {
      await sup.reconcile([{ id: "c0", engine: "vllm", launch: launch("c0", port) }]);
      const first = await shardReaches(sup, "c0", (s) => s.state === "ready", groups, "ready");
      const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "demo", prompt: "hi", max_tokens: 2 }),
      });
      await res.body?.cancel();
      const crashed = await shardReaches(
        sup,
        "c0",
        (s) => s.last_failure !== null,
        groups,
        "a crash",
      );
      assertStringIncludes(crashed.last_failure!.reason, "exited with code 1");
      const again = await shardReaches(
        sup,
        "c0",
        (s) => s.state === "ready" && s.pid !== first.pid,
        groups,
        "restarted",
      );
      assertOk(again.restarts >= 1);
    },
  );
});

Deno.test("an engine that refuses its arguments fails for good: no restart, reported permanent", async () => {
  const port = freePort();
  await withEngines({ FAKE_ENGINE_LOAD_SECONDS: "0.2" }, {}, async (sup, _events, groups) => {
    const typo = launch("t0", port);
    typo.profile.engine_args = ["--max-model-lenn", "4096"];
    await sup.reconcile([{ id: "t0", engine: "vllm", launch: typo }]);
    const s = await shardReaches(sup, "t0", (x) => x.state === "failed", groups, "failed");
    assertEquals(s.last_failure?.permanent, true);
    assertEquals(s.last_failure?.exit_code, 2);
    assertStringIncludes(s.last_failure!.reason, "unrecognized arguments: --max-model-lenn");
    assertOk(s.last_failure!.log_tail.some((l) => l.includes("usage:")), "the usage text is kept");
    assertEquals(s.restarts, 0);
    // The same engine with a good command line serves: the refusal was the arguments'.
    const good = launch("t1", freePort());
    await sup.reconcile([{ id: "t1", engine: "vllm", launch: good }]);
    const ready = await shardReaches(sup, "t1", (x) => x.state === "ready", groups, "ready");
    assertEquals(ready.last_failure, null);
  });
});

/** The shard's directory, key file and stored key for shard `id` under `stateDir`. */
function keyPaths(stateDir: string, id: string) {
  const dir = join(stateDir, "shards", shardDirName(id));
  return { dir, file: join(dir, "engine_key.yaml"), stored: join(dir, "engine_key") };
}

/** GET /v1/models with `key` as the Bearer token; the status. */
function modelsWith(port: number, key: string): Promise<number> {
  return fetch(`http://127.0.0.1:${port}/v1/models`, {
    headers: { authorization: `Bearer ${key}` },
  }).then(async (r) => (await r.body?.cancel(), r.status));
}

Deno.test("SGLang: a stored key starting with '-', which argparse reads as an option, is replaced", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_LOAD_SECONDS: "0.2" },
    { apiKey: true },
    async (sup, _events, groups, stateDir) => {
      const paths = keyPaths(stateDir, "d0");
      Deno.mkdirSync(paths.dir, { recursive: true });
      const dashed = `-${"a".repeat(42)}`;
      Deno.writeTextFileSync(paths.stored, dashed + "\n", { mode: 0o600 });
      await sup.reconcile([{ id: "d0", engine: "sglang", launch: launch("d0", port) }]);
      const s = await shardReaches(
        sup,
        "d0",
        (x) => x.state === "ready" || x.last_failure !== null,
        groups,
        "ready or a failure",
      );
      assertEquals(s.last_failure, null);
      const key = sup.target("d0")?.key;
      assertOk(typeof key === "string" && !key.startsWith("-"), "a key argparse takes as a value");
      assertEquals(Deno.readTextFileSync(paths.stored).trim(), key);
      assertEquals(await modelsWith(port, key), 200);
    },
  );
});

Deno.test("SGLang's key file: a symlink there is replaced, not followed; after a crash and a tamper it is written again", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_LOAD_SECONDS: "0.2", FAKE_ENGINE_CRASH_AFTER_REQUESTS: "1" },
    { apiKey: true },
    async (sup, _events, groups, stateDir) => {
      const paths = keyPaths(stateDir, "y0");
      Deno.mkdirSync(paths.dir, { recursive: true });
      const target = join(stateDir, "someone_elses.yaml");
      Deno.writeTextFileSync(target, "mine: true\n");
      Deno.symlinkSync(target, paths.file);
      await sup.reconcile([{ id: "y0", engine: "sglang", launch: launch("y0", port) }]);
      const first = await shardReaches(sup, "y0", (s) => s.state === "ready", groups, "ready");
      const key = sup.target("y0")!.key!;
      assertEquals(Deno.readTextFileSync(target), "mine: true\n");
      const st = Deno.lstatSync(paths.file);
      assertOk(st.isFile && !st.isSymlink, "a file of its own at the path");
      assertEquals(st.mode! & 0o777, 0o600);
      // Tampered with while the engine runs, then the engine crashes (its first completion).
      Deno.writeTextFileSync(paths.file, '"api-key": "not-the-key-at-all"\n');
      const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: "demo", prompt: "hi", max_tokens: 2 }),
      });
      await res.body?.cancel();
      await shardReaches(
        sup,
        "y0",
        (s) => s.state === "ready" && s.pid !== first.pid,
        groups,
        "restarted",
      );
      assertEquals(sup.target("y0")!.key, key, "the shard keeps its key across restarts");
      assertEquals(Deno.readTextFileSync(paths.file), `"api-key": ${JSON.stringify(key)}\n`);
      assertEquals(await modelsWith(port, key), 200);
      assertEquals(await modelsWith(port, "not-the-key-at-all"), 401);
    },
  );
});

Deno.test("SGLang's key file cannot be written: a restartable failure without the key, then it serves", async () => {
  const port = freePort();
  await withEngines(
    { FAKE_ENGINE_LOAD_SECONDS: "0.2" },
    { apiKey: true },
    async (sup, _events, groups, stateDir) => {
      const paths = keyPaths(stateDir, "w0");
      // A non-empty directory where the file goes: the rename over it fails.
      Deno.mkdirSync(join(paths.file, "in_the_way"), { recursive: true });
      await sup.reconcile([{ id: "w0", engine: "sglang", launch: launch("w0", port) }]);
      const failed = await shardReaches(
        sup,
        "w0",
        (s) => s.last_failure !== null,
        groups,
        "a failure",
      );
      const key = Deno.readTextFileSync(paths.stored).trim();
      assertEquals(failed.last_failure!.permanent, false);
      assertStringIncludes(failed.last_failure!.reason, "cannot prepare the engine key");
      assertOk(!failed.last_failure!.reason.includes(key), "the reason holds no key");
      assertEquals(
        [...Deno.readDirSync(paths.dir)].filter((e) => e.name.includes(".tmp-")),
        [],
        "no temporary copy of the key is left",
      );
      Deno.removeSync(paths.file, { recursive: true });
      await shardReaches(sup, "w0", (s) => s.state === "ready", groups, "ready after the fix");
      assertEquals(await modelsWith(port, key), 200);
    },
  );
});

Deno.test("an SGLang an older agent started with --api-key KEY is adopted with a notice, never the key", async () => {
  const port = freePort();
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_supervisor_engines_test_" });
  const groups = new Set<number>();
  const env = { FAKE_ENGINE_LOAD_SECONDS: "0.2" };
  const shard = { id: "a0", engine: "sglang", launch: launch("a0", port) };
  try {
    // The older agent: SGLang's key in argv.
    let pid = 0;
    await withEngines(
      env,
      { apiKey: { flag: "--api-key" }, stateDir, detach: true, groups },
      async (sup, _events, g) => {
        await sup.reconcile([shard]);
        pid = (await shardReaches(sup, "a0", (s) => s.state === "ready", g, "ready")).pid!;
      },
    );
    const key = Deno.readTextFileSync(keyPaths(stateDir, "a0").stored).trim();
    assertOk(Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0").includes(key));
    // Older agents left shard directories at the umask's 0755.
    Deno.chmodSync(keyPaths(stateDir, "a0").dir, 0o755);
    // This agent: the key belongs in engine_key.yaml.
    await withEngines(env, { apiKey: true, stateDir, groups }, async (sup, events, g) => {
      await sup.reconcile([shard]);
      const ready = await shardReaches(sup, "a0", (s) => s.state === "ready", g, "ready");
      assertEquals(ready.pid, pid, "adopted, not restarted");
      assertEquals(Deno.statSync(keyPaths(stateDir, "a0").dir).mode! & 0o777, 0o700);
      const adopted = events.filter((e) => e.shard === "a0" && e.kind === "adopted");
      assertEquals(adopted.length, 1);
      assertStringIncludes(adopted[0].message, "its engine key is in its command line");
      assertStringIncludes(adopted[0].message, "engine_key.yaml");
      assertOk(!events.some((e) => e.message.includes(key)), "no event holds the key");
    });
  } finally {
    killGroups(groups);
    await Deno.remove(stateDir, { recursive: true });
  }
});
