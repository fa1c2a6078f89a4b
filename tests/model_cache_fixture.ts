/**
 * Fixtures of the model cache's tests: a small synthetic model, a cache
 * with small chunks and instant backoff, and a temporary directory that is
 * always removed.
 *
 * @module
 */
import { FakeClock } from "./fake_clock.ts";
import { syntheticSnapshot } from "./memory_byte_source.ts";
import type { CacheEvent } from "../agent/model_cache/cache_events.ts";
import { ModelCache, type ModelCacheOptions } from "../agent/model_cache/model_cache.ts";
import { type CacheFs, denoCacheFs } from "../agent/model_cache/cache_fs.ts";

/** The commit of {@link sampleModel} unless told otherwise. */
export const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";

/** A 3-file model: two LFS shards of 5 KiB and 3 KiB, a small config in git. */
export function sampleModel(commit = COMMIT, configSeed = 1) {
  return syntheticSnapshot("acme/tiny-llm", commit, [
    { path: "config.json", size: 300, seed: configSeed, lfs: false },
    { path: "model-00001-of-00002.safetensors", size: 5 * 1024, seed: 2 },
    { path: "model-00002-of-00002.safetensors", size: 3 * 1024 + 7, seed: 3 },
  ]);
}

/** A cache over `root` with 1 KiB chunks, instant backoff, events collected. */
export function testCache(root: string, extra: Partial<ModelCacheOptions> = {}) {
  const events: CacheEvent[] = [];
  const cache = new ModelCache({
    root,
    chunkBytes: 1024,
    concurrency: 3,
    clock: new FakeClock(),
    sleep: () => Promise.resolve(),
    random: () => 0,
    onEvent: (e) => events.push(e),
    ...extra,
  });
  return { cache, events };
}

/** Runs `body` with a fresh temporary directory, removed after. */
export async function withTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_model_cache_" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * A real file system whose disk fills after `room` bytes of writes: plenty
 * of free space before the first write (a download's pre-check passes),
 * then what is left, and ENOSPC (as Deno words it) for a write past it.
 */
export function diskThatFills(room: number): CacheFs {
  let left = room;
  return {
    ...denoCacheFs,
    freeBytes: () => Promise.resolve(left === room ? 1e12 : left),
    async openAt(path, offset) {
      const w = await denoCacheFs.openAt(path, offset);
      return {
        ...w,
        write(bytes) {
          if (bytes.length > left) {
            left = 0;
            const e = new Error("No space left on device (os error 28)");
            return Promise.reject(Object.assign(e, { code: "ENOSPC" }));
          }
          left -= bytes.length;
          return w.write(bytes);
        },
      };
    },
  };
}
