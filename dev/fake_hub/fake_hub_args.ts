/**
 * The fake hub's command line:
 *
 * ```sh
 * deno run -A --no-config dev/fake_hub/fake_hub.ts [--host H] [--port P] [--cdn-port P]
 *   [--models DIR] [--synthetic org/name[,preset=P][,shards=N][,bytes=SIZE][,claim=SIZE|real][,gated]]…
 *   [--rate SIZE] [--ttl SECONDS] [--stop-on-stdin-close]
 * ```
 *
 * Tokens of its accounts come from `FAKE_HUB_TOKENS` (comma-separated),
 * never from argv, where `ps` would show them; a `gated` synthetic repo
 * grants them all access. Sizes take `KiB`, `MiB`, `GiB` (`2GiB`).
 *
 * @module
 */
import type { SyntheticModelSpec } from "./synthetic_model.ts";
import { MODEL_PRESETS } from "./model_presets.ts";

/** A command line the fake hub refuses; the message names the flag. */
export class UsageError extends Error {
  /** Builds one. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** What the command line asks for. */
export interface FakeHubArgs {
  /** Where to listen. */
  host: string;
  /** The hub's port. */
  port: number;
  /** The CDN's port. */
  cdnPort: number;
  /** A directory of `{org}/{name}/` repos. */
  models?: string;
  /** Synthetic repos to make. */
  synthetic: SyntheticModelSpec[];
  /** The origin's cap, bytes per second. */
  rate?: number;
  /** Signed CDN URLs' lifetime, seconds. */
  ttl: number;
  /**
   * Stop when standard input closes: a parent that holds the pipe (`llmgw
   * dev`) takes the hub with it even when killed with SIGKILL.
   */
  stopOnStdinClose: boolean;
}

const UNITS: Record<string, number> = {
  "": 1,
  B: 1,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
};

/** `2GiB`, `512MiB`, `1000` → bytes. */
export function parseSize(text: string, flag: string): number {
  const m = text.match(/^(\d+(?:\.\d+)?)\s*([A-Za-z]*)$/);
  const unit = m ? UNITS[m[2]] : undefined;
  const bytes = m && unit !== undefined ? Math.floor(Number(m[1]) * unit) : NaN;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new UsageError(
      `${flag}: ${JSON.stringify(text)} is not a size (like 1000, 512MiB, 2GiB)`,
    );
  }
  return bytes;
}

function parsePort(text: string | undefined, flag: string): number {
  const port = Number(text);
  if (text === undefined || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`${flag} needs a port from 0 to 65535, got ${JSON.stringify(text ?? "")}`);
  }
  return port;
}

/** `org/name,preset=…,shards=…,bytes=…,gated` → a spec; `tokens` are granted to a gated repo. */
export function parseSynthetic(text: string, tokens: string[]): SyntheticModelSpec {
  const [repo, ...options] = text.split(",");
  if (!/^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/.test(repo)) {
    throw new UsageError(`--synthetic: ${JSON.stringify(repo)} is not org/name`);
  }
  const spec: SyntheticModelSpec = { repo };
  for (const option of options) {
    const [key, value] = option.split("=", 2);
    if (key === "gated" && value === undefined) {
      spec.gated = "manual";
      spec.grantedTokens = tokens;
    } else if (key === "preset" && value) spec.preset = value;
    else if (key === "shards" && /^\d+$/.test(value ?? "") && Number(value) >= 1) {
      spec.shards = Number(value);
    } else if (key === "bytes" && value) spec.weightBytes = parseSize(value, "--synthetic bytes");
    else if (key === "claim" && value === "real") spec.claimedBytes = REAL_SIZE;
    else if (key === "claim" && value) spec.claimedBytes = parseSize(value, "--synthetic claim");
    else {
      throw new UsageError(
        `--synthetic ${repo}: unknown option ${
          JSON.stringify(option)
        } (preset=, shards=, bytes=, claim=SIZE|real, gated)`,
      );
    }
  }
  // The preset's real size, once the preset is known (whatever the options' order).
  if (spec.claimedBytes === REAL_SIZE) {
    const preset = MODEL_PRESETS[spec.preset ?? "llama-3.1-8b-instruct"];
    if (preset === undefined) {
      throw new UsageError(`--synthetic ${repo}: claim=real needs a known preset=`);
    }
    spec.claimedBytes = preset.weightBytes;
  }
  return spec;
}

/** `claim=real` until the preset is known. */
const REAL_SIZE = -1;

/** Reads argv; `tokens` are the accounts' tokens (from the environment). */
export function parseFakeHubArgs(argv: readonly string[], tokens: string[]): FakeHubArgs {
  const args: FakeHubArgs = {
    host: "127.0.0.1",
    port: 0,
    cdnPort: 0,
    synthetic: [],
    ttl: 600,
    stopOnStdinClose: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    const need = () => {
      if (value === undefined) throw new UsageError(`${flag} needs a value`);
      i++;
      return value;
    };
    switch (flag) {
      case "--host":
        args.host = need();
        break;
      case "--port":
        args.port = parsePort(need(), flag);
        break;
      case "--cdn-port":
        args.cdnPort = parsePort(need(), flag);
        break;
      case "--models":
        args.models = need();
        break;
      case "--synthetic":
        args.synthetic.push(parseSynthetic(need(), tokens));
        break;
      case "--rate":
        args.rate = parseSize(need(), flag);
        break;
      case "--stop-on-stdin-close":
        args.stopOnStdinClose = true;
        break;
      case "--ttl": {
        const ttl = Number(need());
        if (!(ttl > 0)) {
          throw new UsageError(`--ttl needs seconds > 0, got ${JSON.stringify(value)}`);
        }
        args.ttl = ttl;
        break;
      }
      default:
        throw new UsageError(`unknown flag ${JSON.stringify(flag)}`);
    }
  }
  if (args.models === undefined && args.synthetic.length === 0) {
    throw new UsageError("nothing to serve: give --models DIR or --synthetic org/name");
  }
  return args;
}
