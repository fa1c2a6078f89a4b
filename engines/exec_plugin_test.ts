/**
 * The engine API key declaration of executable plugins (design §11.2): what
 * `describe` may declare, and the profile checks llmgw adds for it. The
 * plugins are small shell scripts printing canned JSON.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { loadExecPlugin } from "./exec_plugin.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "./types.ts";

const PROBES = { serves_http: true, liveness: [], readiness: [], loading_progress: [] };
const ANSWER = JSON.stringify({
  problems: [],
  command: { argv: ["serve"], env: {} },
  probes: PROBES,
  metrics: null,
});

/** Writes `llmgw-engine-NAME` printing `describe` and {@link ANSWER}, and returns its path. */
async function plugin(dir: string, name: string, describe: unknown): Promise<string> {
  const path = join(dir, `llmgw-engine-${name}`);
  await Deno.writeTextFile(
    path,
    `#!/bin/sh\ncase "$1" in\n  describe) cat <<'JSON'\n${
      JSON.stringify(describe)
    }\nJSON\n;;\n  shard) cat >/dev/null; cat <<'JSON'\n${ANSWER}\nJSON\n;;\nesac\n`,
  );
  await Deno.chmod(path, 0o755);
  return path;
}

function description(name: string, extra: Record<string, unknown> = {}) {
  return { api_version: 1, name, quantizations: ["none"], version_command: [], ...extra };
}

function launch(o: { args?: string[]; env?: Record<string, string> } = {}): ShardLaunch {
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "d",
    replica_id: "d-r0",
    shard_id: "d-r0/0",
    model: "org/m",
    served_model_name: "m",
    profile: {
      name: "p",
      tensor_parallel: 1,
      pipeline_parallel: 1,
      nodes: 1,
      gpus_per_node: 1,
      quantization: "none",
      engine_args: o.args ?? [],
      engine_options: {},
      env: o.env ?? {},
    },
    rank: 0,
    world: { nodes: 1, leader_addr: "192.0.2.1", rendezvous_port: 29500, leader_http_port: 8000 },
    gpus: [{ index: 0, class: "l40s-45g", compute_capability: "8.9" }],
    fabric: null,
    node: { id: "n1", mgmt_addr: "192.0.2.1", mgmt_interface: "eth0" },
    port: 8000,
    engine_version: null,
  };
}

async function inTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a plugin that declares no API key has none, and profiles are not checked for one", async () => {
  await inTempDir(async (dir) => {
    const d = await loadExecPlugin(await plugin(dir, "plain", description("plain")));
    assertOk(!("api_key" in d), JSON.stringify(d));
    const spec = await d.prepare(launch({ args: ["--api-key", "x"], env: { KEY: "y" } }));
    assertEquals(spec.problems, []);
  });
});

Deno.test("a declared API key reaches the driver, and a profile may not set it", async () => {
  await inTempDir(async (dir) => {
    const byEnv = await loadExecPlugin(
      await plugin(dir, "envkey", description("envkey", { api_key: { env: "ENGINE_KEY" } })),
    );
    assertEquals(byEnv.api_key, { env: "ENGINE_KEY" });
    assertEquals((await byEnv.prepare(launch())).problems, []);
    const refused = await byEnv.prepare(launch({ env: { ENGINE_KEY: "s3cret" } }));
    assertEquals(refused.command, null);
    assertEquals(refused.problems, [
      'profile "p": env ENGINE_KEY is the envkey API key, which llmgw generates for every shard; remove it from the profile',
    ]);

    const byFlag = await loadExecPlugin(
      await plugin(dir, "flagkey", description("flagkey", { api_key: { flag: "--token" } })),
    );
    assertEquals(byFlag.api_key, { flag: "--token" });
    const spec = await byFlag.prepare(launch({ args: ["--token=s3cret"] }));
    assertEquals(spec.problems, [
      'profile "p": engine_args sets --token, the flagkey API key, which llmgw generates for every shard; remove it',
    ]);
    assertOk(!spec.problems.join("\n").includes("s3cret"));

    const byFile = await loadExecPlugin(
      await plugin(
        dir,
        "filekey",
        description("filekey", { api_key: { config_file: { flag: "--config", field: "token" } } }),
      ),
    );
    assertEquals(byFile.api_key, { config_file: { flag: "--config", field: "token" } });
    assertEquals((await byFile.prepare(launch())).problems, []);
    const fileRefused = await byFile.prepare(launch({ args: ["--token=s3cret", "--config", "x"] }));
    assertEquals(fileRefused.problems, [
      'profile "p": engine_args sets --token, the filekey API key, which llmgw generates for every shard; remove it',
      'profile "p": engine_args sets --config, the file llmgw gives filekey its API key in; put that file\'s settings in engine_args instead',
    ]);
  });
});

const FORMS =
  'must be {"env": VARIABLE}, {"flag": OPTION} or {"config_file": {"flag": OPTION, "field": KEY}}';

Deno.test("an unusable API key declaration is refused at load, naming the field", async () => {
  const bad: [string, unknown, string][] = [
    ["owned", { env: "CUDA_VISIBLE_DEVICES" }, "is a variable llmgw sets itself"],
    ["llmgw", { env: "LLMGW_ADMIN_TOKEN" }, "is a variable llmgw sets itself"],
    ["badname", { env: "1KEY" }, "must be an environment variable name"],
    ["withvalue", { flag: "--api-key=x" }, "must be an option like --api-key"],
    ["noflag", { flag: "api-key" }, "must be an option like --api-key"],
    ["both", { env: "K", flag: "--k" }, `api_key: ${FORMS}`],
    ["neither", {}, `api_key: ${FORMS}`],
    ["header", { header: "x-api-key" }, FORMS],
    ["fileflag", { config_file: { flag: "--config=x", field: "k" } }, "must be an option like"],
    [
      "filefield",
      { config_file: { flag: "--config", field: "a key" } },
      "must be a config file key",
    ],
    ["nofield", { config_file: { flag: "--config" } }, "field"],
    ["fileextra", { config_file: { flag: "--c", field: "k", mode: "0644" } }, "mode"],
  ];
  await inTempDir(async (dir) => {
    for (const [name, key, shows] of bad) {
      const path = await plugin(dir, name, description(name, { api_key: key }));
      let message = "";
      try {
        await loadExecPlugin(path);
      } catch (e) {
        message = String(e);
      }
      assertStringIncludes(message, `${path} describe:`, name);
      assertStringIncludes(message, "api_key", name);
      assertStringIncludes(message, shows, name);
    }
  });
});
