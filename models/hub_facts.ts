/**
 * A model's facts from the hub (or a mirror) through the hub client: the
 * revision's file list (sizes), then `config.json` and
 * `model.safetensors.index.json` read from it, so the control plane knows a
 * hub model's needs before anything is placed (models/facts_source.ts).
 * Bounded in time and size: `apply` waits on it, and a hub that does not
 * answer (an air-gapped fleet without `HF_ENDPOINT`) only leaves the facts
 * unknown, with a warning.
 *
 * @module
 */
import { type CommitSource, hubCommitSource } from "./commit_source.ts";
import { HubClient } from "./hub_client.ts";
import { hubConfig } from "./hub_config.ts";
import { firstSource, localFactsSource, type ModelFactsSource } from "./facts_source.ts";
import { parseModelFacts } from "./model_facts.ts";

/** Options of {@link hubClientFactsSource}. */
export interface HubFactsOptions {
  /** The revision to read when none is asked (default `main`); the book asks for commits. */
  revision?: string;
  /** How long one model's facts may take, in ms (default 15 s). */
  timeoutMs?: number;
}

/** The largest config.json or index read: real ones are a few kB to a few MB. */
const MAX_SMALL_FILE_BYTES = 16 * 1024 * 1024;

/** A source of facts for hub ids (`org/name`); paths are not its to answer. */
export function hubClientFactsSource(
  client: HubClient,
  options: HubFactsOptions = {},
): ModelFactsSource {
  const defaultRevision = options.revision ?? "main";
  const timeoutMs = options.timeoutMs ?? 15_000;
  return {
    async facts(model, asked) {
      const revision = asked ?? defaultRevision;
      if (!/^[\w.-]+\/[\w.-]+$/.test(model)) return null;
      const signal = AbortSignal.timeout(timeoutMs);
      const snapshot = await client.resolveRevision(model, revision, signal);
      const text = async (path: string): Promise<string | undefined> => {
        const file = snapshot.files.find((f) => f.path === path);
        if (file === undefined) return undefined;
        if (file.size > MAX_SMALL_FILE_BYTES) {
          throw new Error(
            `Cannot read model facts: ${model}/${path} is ${file.size} bytes, more than ${MAX_SMALL_FILE_BYTES}`,
          );
        }
        const stream = await client.byteSource().read(
          model,
          snapshot.commit,
          file,
          0,
          file.size,
          signal,
        );
        return await new Response(stream).text();
      };
      const config = await text("config.json");
      if (config === undefined) {
        throw new Error(`Cannot read model facts: ${model} has no config.json at ${revision}`);
      }
      const index = await text("model.safetensors.index.json");
      return parseModelFacts({
        source: model,
        config,
        index,
        safetensorsSizes: index === undefined
          ? snapshot.files.filter((f) => f.path.endsWith(".safetensors")).map((f) => f.size)
          : undefined,
        fileSizes: snapshot.files.map((f) => f.size),
      });
    },
  };
}

/** What the control plane reads from the hub. */
export interface ControlHub {
  /** Models' facts: local and shared paths, then the hub. */
  facts: ModelFactsSource;
  /** Model revisions' commits. */
  commits: CommitSource;
}

/**
 * The control plane's hub: the one its environment names (`HF_ENDPOINT`,
 * default the public hub), with the token from `tokenFile` (the
 * `--hub-token-file` flag) or else `HF_TOKEN`, as the agent reads them.
 *
 * @throws {HubConfigError} When `HF_ENDPOINT` or the token file cannot be used.
 */
export async function controlHub(
  env: (name: string) => string | undefined,
  tokenFile?: string,
  options: HubFactsOptions = {},
): Promise<ControlHub> {
  const client = new HubClient({ config: await hubConfig({ env, tokenFile }) });
  return {
    facts: firstSource([localFactsSource(), hubClientFactsSource(client, options)]),
    commits: hubCommitSource(client),
  };
}
