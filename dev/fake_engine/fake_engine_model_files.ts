/**
 * The fake engine opens its model as the real engines do (issue #25 item 4),
 * so a launch the agent got wrong fails in dev as it would on a GPU host:
 *
 * - a local directory without `config.json` (nor Mistral's `params.json`):
 *   vLLM's `ValueError: Invalid repository ID or local directory specified`
 *   (vllm/transformers_utils/config.py `get_config`, vLLM PR #13724);
 *   SGLang reads the config through transformers, whose `cached_file` says
 *   the directory "does not appear to have a file named config.json";
 * - a hub id with `HF_HUB_OFFLINE=1` whose snapshot is not in the hub cache
 *   (`HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`):
 *   huggingface_hub refuses the request (`OfflineModeIsEnabled`, raised by
 *   its `OfflineAdapter` in huggingface_hub/utils/_http.py), and vLLM then
 *   gives the same ValueError. docs/engine_reference.md cites both.
 *
 * A hub id with the hub on is not fetched: the fake engine has no hub to
 * read (the agent's model cache does that, docs/models.md).
 *
 * @module
 */
import { join } from "node:path";

/** The lines the engine prints when it cannot open `model`, or null when it can. */
export function modelOpenProblem(
  engine: "vllm" | "sglang",
  model: string,
  env: (name: string) => string | undefined,
  isFile: (path: string) => boolean,
): string[] | null {
  if (model.startsWith("/") || model.startsWith("./") || model.startsWith("file://")) {
    const dir = model.startsWith("file://") ? new URL(model).pathname : model;
    if (isFile(join(dir, "config.json")) || isFile(join(dir, "params.json"))) return null;
    return engine === "vllm" ? invalidModel(model) : [
      `OSError: ${dir} does not appear to have a file named config.json.`,
    ];
  }
  if (!isOffline(env("HF_HUB_OFFLINE"))) return null;
  if (cachedConfig(model, env, isFile)) return null;
  const endpoint = (env("HF_ENDPOINT") ?? "https://huggingface.co").replace(/\/+$/, "");
  const offline = "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach " +
    `${endpoint}/${model}/resolve/main/config.json: offline mode is enabled. ` +
    "To disable it, please unset the `HF_HUB_OFFLINE` environment variable.";
  return engine === "vllm"
    ? [
      offline,
      "",
      "The above exception was the direct cause of the following exception:",
      "",
      ...invalidModel(model),
    ]
    : [offline];
}

/** huggingface_hub's truthy values of a boolean variable (`constants._is_true`). */
function isOffline(value: string | undefined): boolean {
  return value !== undefined && ["1", "ON", "YES", "TRUE"].includes(value.toUpperCase());
}

/** Whether `main` of hub id `model` has its `config.json` in the hub cache the environment names. */
function cachedConfig(
  model: string,
  env: (name: string) => string | undefined,
  isFile: (path: string) => boolean,
): boolean {
  const home = env("HF_HOME") ?? join(env("HOME") ?? "/", ".cache", "huggingface");
  const cache = env("HF_HUB_CACHE") ?? join(home, "hub");
  const repoDir = join(cache, `models--${model.replaceAll("/", "--")}`);
  let commit: string;
  try {
    commit = Deno.readTextFileSync(join(repoDir, "refs", "main")).trim();
  } catch {
    return false;
  }
  return isFile(join(repoDir, "snapshots", commit, "config.json"));
}

function invalidModel(model: string): string[] {
  return [
    `ValueError: Invalid repository ID or local directory specified: '${model}'.`,
    "Please verify the following requirements:",
    "1. Provide a valid Hugging Face repository ID.",
    "2. Specify a local directory that contains a recognized configuration file.",
    "   - For Hugging Face models: ensure the presence of a 'config.json'.",
    "   - For Mistral models: ensure the presence of a 'params.json'.",
  ];
}

/** Whether `path` is a file (following links, as Python's `os.path.isfile` does). */
export function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}
