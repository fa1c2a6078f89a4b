/**
 * Third-party engines through the executable plugin mechanism
 * (docs/plugins.md): the example llama.cpp plugin loaded the way a user
 * loads one, and the ways a plugin can be broken.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { fixturePath } from "./fixtures.ts";
import { main } from "../cli/main.ts";
import type { PlannedReplica } from "../cli/plan_command.ts";
import { EngineRegistry } from "../engines/registry.ts";
import { loadExecPlugins } from "../engines/exec_plugin.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "../engines/types.ts";

const EXAMPLES = fixturePath("../../examples/engines");
const CLUSTER = fixturePath("clusters/recorded.json");
const GEMMA = fixturePath("../../examples/deployments/gemma-llamacpp.yaml");
const MAIN = fixturePath("../../main.ts");

async function run(args: string[]) {
  let out = "";
  let err = "";
  const code = await main(args, { out: (t) => out += t, err: (t) => err += t });
  return { code, out, err };
}

Deno.test("the example llama.cpp plugin loads from its directory next to the built-ins", async () => {
  const registry = await EngineRegistry.load([EXAMPLES]);
  assertEquals(registry.problems, []);
  assertEquals([...registry.names()].sort(), ["llamacpp", "sglang", "vllm"]);
  assertEquals(registry.get("llamacpp")?.source, join(EXAMPLES, "llmgw-engine-llamacpp"));
  assertEquals(registry.get("llamacpp")?.quantizations, ["none", "gguf"]);
});

Deno.test("llmgw plan runs a deployment on the third-party engine end to end", async () => {
  const r = await run([
    "plan",
    "--engine-plugins",
    EXAMPLES,
    "--cluster",
    CLUSTER,
    "--deployment",
    GEMMA,
    "--json",
  ]);
  assertEquals(r.err, "");
  assertEquals(r.code, 0);
  const [replica] = (JSON.parse(r.out) as { replicas: PlannedReplica[] }).replicas;
  assertOk(replica.status === "placed");
  assertEquals(replica.engine, "llamacpp");
  const [shard] = replica.shards;
  assertEquals(shard.node, "l40s-pcie-vm");
  assertEquals(shard.argv, [
    "llama-server",
    "-hf",
    "ggml-org/gemma-3-4b-it-GGUF",
    "--alias",
    "gemma-3-4b",
    "--host",
    "0.0.0.0",
    "--port",
    "20000",
    "-ngl",
    "999",
    "--metrics",
    "--ctx-size",
    "8192",
  ]);
  assertEquals(shard.env, { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: "0" });
});

Deno.test("without the plugin directory the engine is unknown, with the field named", async () => {
  const r = await run(["plan", "--cluster", CLUSTER, "--deployment", GEMMA]);
  assertEquals(r.code, 2);
  assertStringIncludes(r.err, 'profiles[0].engine: profile "l40s-gguf": unknown engine "llamacpp"');
});

Deno.test("LLMGW_ENGINE_PLUGINS names plugin directories too", async () => {
  // A process of its own, given the variable: this one's environment is
  // shared by the test files running in parallel, so no test sets it.
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "plan", "--cluster", CLUSTER, "--deployment", GEMMA],
    env: { LLMGW_ENGINE_PLUGINS: `/nonexistent:${EXAMPLES}`, NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(r.stderr);
  assertEquals(r.code, 0, err);
  assertStringIncludes(err, "engine plugin directory /nonexistent: does not exist");
  assertStringIncludes(
    new TextDecoder().decode(r.stdout),
    "llama-server -hf ggml-org/gemma-3-4b-it-GGUF",
  );
});

/** A plugin as a shell script printing canned answers. */
async function cannedPlugin(
  dir: string,
  name: string,
  describe: string,
  shard = "{}",
): Promise<void> {
  const path = join(dir, `llmgw-engine-${name}`);
  await Deno.writeTextFile(
    path,
    `#!/bin/sh\ncase "$1" in\n  describe) cat <<'JSON'\n${describe}\nJSON\n;;\n  shard) cat >/dev/null; cat <<'JSON'\n${shard}\nJSON\n;;\n  hang) ;;\nesac\n`,
  );
  await Deno.chmod(path, 0o755);
}

const describe = (name: string) =>
  JSON.stringify({ api_version: 1, name, quantizations: ["none"], version_command: [] });

function launch(): ShardLaunch {
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "d",
    replica_id: "d-r0",
    shard_id: "d-r0/0",
    model: "org/m",
    served_model_name: "m",
    profile: {
      name: "p",
      tensor_parallel: 2,
      pipeline_parallel: 1,
      nodes: 1,
      gpus_per_node: 2,
      quantization: "none",
      engine_args: [],
      engine_options: {},
      env: { HF_HOME: "/models" },
    },
    rank: 0,
    world: { nodes: 1, leader_addr: "192.0.2.1", rendezvous_port: 29500, leader_http_port: 8000 },
    gpus: [
      { index: 2, class: "l40s-45g", compute_capability: "8.9" },
      { index: 3, class: "l40s-45g", compute_capability: "8.9" },
    ],
    fabric: null,
    node: { id: "n1", mgmt_addr: "192.0.2.1", mgmt_interface: "eth0" },
    port: 8020,
    engine_version: null,
  };
}

Deno.test("a broken plugin is reported and the others still load", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await cannedPlugin(dir, "good", describe("good"));
    await cannedPlugin(dir, "garbage", "not json");
    await cannedPlugin(dir, "misnamed", describe("other"));
    await cannedPlugin(dir, "vllm", describe("vllm"));
    await cannedPlugin(
      dir,
      "oldapi",
      JSON.stringify({
        api_version: 0,
        name: "oldapi",
        quantizations: ["none"],
        version_command: [],
      }),
    );
    await Deno.writeTextFile(join(dir, "llmgw-engine-notexec"), "#!/bin/sh\n");
    const { drivers, problems } = await loadExecPlugins([dir]);
    assertEquals(drivers.map((d) => d.name), ["good", "vllm"]);
    const text = problems.join("\n");
    assertStringIncludes(text, "llmgw-engine-garbage describe did not print JSON");
    assertStringIncludes(
      text,
      'says it is engine "other"; its file must be named llmgw-engine-other',
    );
    assertStringIncludes(text, "llmgw-engine-oldapi describe:\n  api_version:");
    assertStringIncludes(text, "llmgw-engine-notexec");
    // A plugin may not take a built-in engine's name.
    const loaded = await EngineRegistry.load([dir]);
    assertEquals(loaded.get("vllm")?.source, "builtin");
    assertStringIncludes(
      loaded.problems.join("\n"),
      "is named vllm, already provided by builtin; ignored",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("llmgw's GPU environment wins over a plugin's, and bad answers become problems", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const probes = { serves_http: true, liveness: [], readiness: [], loading_progress: [] };
    await cannedPlugin(
      dir,
      "sneaky",
      describe("sneaky"),
      JSON.stringify({
        problems: [],
        command: { argv: ["serve"], env: { CUDA_VISIBLE_DEVICES: "7", ENGINE_FLAG: "1" } },
        probes,
        metrics: null,
      }),
    );
    await cannedPlugin(
      dir,
      "sloppy",
      describe("sloppy"),
      JSON.stringify({ problems: [], command: { argv: [] } }),
    );
    const { drivers } = await loadExecPlugins([dir]);
    const sneaky = await drivers.find((d) => d.name === "sneaky")!.prepare(launch());
    assertEquals(sneaky.problems, []);
    assertEquals(sneaky.command?.env, {
      HF_HOME: "/models",
      ENGINE_FLAG: "1",
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
      CUDA_VISIBLE_DEVICES: "2,3",
    });
    const sloppy = await drivers.find((d) => d.name === "sloppy")!.prepare(launch());
    assertEquals(sloppy.command, null);
    const text = sloppy.problems.join("\n");
    assertStringIncludes(text, "engine plugin sloppy:");
    assertStringIncludes(text, "command.argv");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a plugin that hangs is cut off and reported", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "llmgw-engine-slow");
    await Deno.writeTextFile(path, "#!/bin/sh\nexec sleep 30\n");
    await Deno.chmod(path, 0o755);
    const { drivers, problems } = await loadExecPlugins([dir], 300);
    assertEquals(drivers, []);
    assertStringIncludes(problems[0], "did not finish within 300 ms");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
