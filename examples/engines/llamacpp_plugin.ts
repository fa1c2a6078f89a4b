/**
 * An example third-party engine plugin: llama.cpp's `llama-server`
 * (docs/plugins.md). It lives outside llmgw's source tree, is loaded through
 * the same mechanism a user's plugin is (an executable named
 * `llmgw-engine-llamacpp` in a plugin directory), and works with the
 * compiled llmgw binaries, which only run it.
 *
 * What it does, from llama.cpp's server documentation:
 * - `llama-server -m FILE.gguf` for a local file, `-hf REPO` for a Hugging
 *   Face GGUF repository; `--alias` is the name `/v1/models` lists;
 *   `-ngl 999` offloads every layer to the GPUs in CUDA_VISIBLE_DEVICES,
 *   which llama.cpp splits by layer by default; `--metrics` enables
 *   Prometheus metrics (`llamacpp:requests_processing`, `…_deferred`).
 * - It opens its port at once and answers `/health` with 503 "Loading
 *   model" until the weights are loaded, then 200.
 * - One process per replica: no multi-node (its RPC backend is not a
 *   tensor-parallel engine llmgw can place), so nodes > 1 is refused.
 * - GGUF files carry their own quantization, so only `none` and `gguf` make
 *   sense as the profile's quantization.
 *
 * @module
 */
import {
  type EnginePlugin,
  serveEnginePlugin,
  type ShardLaunch,
} from "../../engines/plugin_sdk.ts";

/** Flags llmgw sets; a profile's engine_args may not. */
const OWNED = [
  "-m",
  "--model",
  "-hf",
  "--hf-repo",
  "--host",
  "--port",
  "--alias",
  "-a",
  "--metrics",
];

/** The llama.cpp plugin. */
export const llamacppPlugin: EnginePlugin = {
  name: "llamacpp",
  quantizations: ["none", "gguf"],
  version_command: ["llama-server", "--version"],
  parseVersion(output: string): string | null {
    // "version: 5489 (2d38b6e4)": llama.cpp versions are build numbers.
    const m = /version:\s*(\d+)/.exec(output);
    return m === null ? null : m[1];
  },
  validate(launch: ShardLaunch): string[] {
    const problems: string[] = [];
    const p = launch.profile;
    if (p.nodes !== 1) {
      problems.push(`profile "${p.name}": llamacpp runs on one node; nodes is ${p.nodes}`);
    }
    if (p.pipeline_parallel !== 1) {
      problems.push(
        `profile "${p.name}": llamacpp has no pipeline parallelism; set pipeline_parallel to 1`,
      );
    }
    for (const key of Object.keys(p.engine_options)) {
      problems.push(`profile "${p.name}": llamacpp has no engine option "${key}"`);
    }
    for (const arg of p.engine_args) {
      if (OWNED.includes(arg.split("=")[0])) {
        problems.push(
          `profile "${p.name}": engine_args sets ${
            arg.split("=")[0]
          }, which llmgw sets for llamacpp`,
        );
      }
    }
    return problems;
  },
  command(launch: ShardLaunch) {
    const local = launch.model.startsWith("/") || launch.model.startsWith("./") ||
      launch.model.endsWith(".gguf");
    return {
      argv: [
        "llama-server",
        ...(local ? ["-m", launch.model] : ["-hf", launch.model]),
        "--alias",
        launch.served_model_name,
        "--host",
        "0.0.0.0",
        "--port",
        String(launch.port),
        "-ngl",
        "999",
        "--metrics",
        ...launch.profile.engine_args,
      ],
      env: {},
    };
  },
  probes(launch: ShardLaunch) {
    return {
      serves_http: true,
      // The process is alive is all liveness can say: /health is 503 while loading.
      liveness: [],
      readiness: [
        { path: "/health", expect_status: 200 },
        { path: "/v1/models", expect_status: 200, lists_model: launch.served_model_name },
      ],
      loading_progress: [],
    };
  },
  metrics() {
    return {
      running: ["llamacpp:requests_processing"],
      waiting: ["llamacpp:requests_deferred"],
      kv_cache_usage: ["llamacpp:kv_cache_usage_ratio"],
    };
  },
};

if (import.meta.main) {
  Deno.exit(await serveEnginePlugin(llamacppPlugin));
}
