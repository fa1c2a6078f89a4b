/**
 * The agent's model cache flags, read into what {@link ModelCache} and its
 * eviction take: `--model-cache DIR` (default `<state-dir>/models`),
 * `--download-rate RATE`, `--cache-high PCT`, `--cache-low PCT`. The CLI
 * passes the raw strings (absent when not given); every error names the
 * flag.
 *
 * @module
 */
import { resolve } from "node:path";
import { parseDownloadRate } from "./download_rate.ts";
import {
  checkWatermarks,
  DEFAULT_WATERMARKS,
  parseWatermark,
  type Watermarks,
} from "./eviction_plan.ts";

/** A `--model-cache` that cannot be used. */
export class CacheFlagError extends Error {
  /** `message` names the flag. */
  constructor(message: string) {
    super(message);
    this.name = "CacheFlagError";
  }
}

/** The flags as given. */
export interface CacheFlags {
  modelCache?: string;
  downloadRate?: string;
  cacheHigh?: string;
  cacheLow?: string;
}

/** What they mean. */
export interface CacheSettings {
  /** The cache directory, absolute. */
  root: string;
  /** Bytes per second; null for no limit. */
  rateBytesPerSecond: number | null;
  watermarks: Watermarks;
}

/** Reads `flags`; `stateDir` gives the default directory, `cwd` resolves a relative one. */
export function cacheSettings(flags: CacheFlags, stateDir: string, cwd: string): CacheSettings {
  const dir = flags.modelCache?.trim();
  if (dir === "") throw new CacheFlagError("Cannot parse --model-cache: value is empty");
  const root = dir === undefined ? resolve(cwd, stateDir, "models") : resolve(cwd, dir);
  return {
    root,
    rateBytesPerSecond: flags.downloadRate === undefined
      ? null
      : parseDownloadRate(flags.downloadRate, "--download-rate"),
    watermarks: checkWatermarks({
      highPercent: flags.cacheHigh === undefined
        ? DEFAULT_WATERMARKS.highPercent
        : parseWatermark(flags.cacheHigh, "--cache-high"),
      lowPercent: flags.cacheLow === undefined
        ? DEFAULT_WATERMARKS.lowPercent
        : parseWatermark(flags.cacheLow, "--cache-low"),
    }),
  };
}
