/**
 * Synthetic models for tests and `llmgw dev`: a repo laid out as a real
 * one is (safetensors shards, `model.safetensors.index.json`, `config.json`,
 * tokenizer and generation files, `.gitattributes`), whose shards are valid
 * safetensors files (8-byte little-endian header length, a JSON header of
 * tensors with `dtype`, `shape` and `data_offsets`, then the tensor bytes).
 * Tensor bytes are deterministic from a seed and generated for any range on
 * the fly, so a 2 GiB model costs no 2 GiB of memory or disk; the hashes the
 * revision API lists are computed once, at creation, by streaming.
 *
 * @module
 */
import { MODEL_PRESETS } from "./model_presets.ts";
import {
  type FakeFile,
  fakeFile,
  type FakeRepo,
  fakeRepo,
  type FakeRepoOptions,
  smallFile,
} from "./fake_repo.ts";

/** What to make. */
export interface SyntheticModelSpec extends FakeRepoOptions {
  /** `org/name`. */
  repo: string;
  /** A key of {@link MODEL_PRESETS} whose `config.json` it carries (default llama-3.1-8b-instruct). */
  preset?: string;
  /** Keys merged over the preset's `config.json`. */
  config?: Record<string, unknown>;
  /** How many safetensors shards (default 2). */
  shards?: number;
  /** Tensor bytes in all (default 4 MiB); rounded down to whole BF16 values. */
  weightBytes?: number;
  /**
   * The `metadata.total_size` its index claims (default: the shards' own
   * bytes). `llmgw dev` claims the real model's size (`claim=real`), so the
   * control plane's facts and memory estimate read as for the real model
   * while the files stay small; nothing checks the claim against the files,
   * as nothing in vLLM does.
   */
  claimedBytes?: number;
  /** Seed of the tensor bytes (default derived from the repo id). */
  seed?: number;
}

/** The largest tensor a shard holds; bigger shards hold several. */
const MAX_TENSOR_BYTES = 64 * 1024 * 1024;
const BLOCK_BYTES = 4096;

function seedOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Block `k` of the stream keyed `key`: 4096 bytes of xorshift32 output. */
function block(key: number, k: number, out: Uint32Array): void {
  let x = (Math.imul(key ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(k + 1, 0xc2b2ae35)) >>> 0 || 1;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x;
  }
}

/** Bytes `start` … `end - 1` of the endless deterministic stream keyed `key`. */
export async function* deterministicBytes(
  key: number,
  start: number,
  end: number,
): AsyncIterable<Uint8Array> {
  const blocksPerChunk = 16;
  let k = Math.floor(start / BLOCK_BYTES);
  let at = start;
  while (at < end) {
    const chunk = new Uint8Array(blocksPerChunk * BLOCK_BYTES);
    const words = new Uint32Array(chunk.buffer);
    for (let b = 0; b < blocksPerChunk; b++) {
      block(key, k + b, words.subarray((b * BLOCK_BYTES) / 4, ((b + 1) * BLOCK_BYTES) / 4));
    }
    const chunkStart = k * BLOCK_BYTES;
    const from = at - chunkStart;
    const to = Math.min(end - chunkStart, chunk.byteLength);
    yield chunk.subarray(from, to);
    at = chunkStart + to;
    k += blocksPerChunk;
  }
}

/** One tensor of a shard. */
interface Tensor {
  name: string;
  bytes: number;
}

/** The safetensors header (length prefix and JSON, padded with spaces to 8 bytes) for `tensors`. */
export function safetensorsHeader(tensors: readonly Tensor[]): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = {
      dtype: "BF16",
      shape: [t.bytes / 2],
      data_offsets: [offset, offset + t.bytes],
    };
    offset += t.bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const text = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + text.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(text.byteLength), true);
  out.set(text, 8);
  return out;
}

/** A shard file: its header from memory, its tensor bytes generated. */
function shardFile(path: string, tensors: readonly Tensor[], key: number): Promise<FakeFile> {
  const header = safetensorsHeader(tensors);
  const body = tensors.reduce((sum, t) => sum + t.bytes, 0);
  const size = header.byteLength + body;
  return fakeFile(path, size, async function* (start, end) {
    if (start < header.byteLength) yield header.subarray(start, Math.min(end, header.byteLength));
    const from = Math.max(start, header.byteLength) - header.byteLength;
    const to = end - header.byteLength;
    if (to > from) yield* deterministicBytes(key, from, to);
  }, true);
}

/** The tensors of each shard: `weightBytes` split evenly, each tensor at most 64 MiB. */
function layout(shards: number, weightBytes: number): Tensor[][] {
  const values = Math.floor(weightBytes / 2);
  const out: Tensor[][] = [];
  let layer = 0;
  for (let s = 0; s < shards; s++) {
    const shardValues = Math.floor(values / shards) + (s === shards - 1 ? values % shards : 0);
    const tensors: Tensor[] = [];
    let left = shardValues * 2;
    while (left > 0) {
      const bytes = Math.min(left, MAX_TENSOR_BYTES);
      tensors.push({ name: `model.layers.${layer++}.mlp.weight`, bytes });
      left -= bytes;
    }
    out.push(tensors);
  }
  if (out[0].length > 0) out[0][0].name = "model.embed_tokens.weight";
  const last = out[out.length - 1];
  if (last.length > 0 && !(out.length === 1 && last.length === 1)) {
    last[last.length - 1].name = "lm_head.weight";
  }
  return out;
}

/** The files of a synthetic model (to add as a further commit, say). */
export async function syntheticFiles(spec: SyntheticModelSpec): Promise<FakeFile[]> {
  const shards = spec.shards ?? 2;
  const weightBytes = spec.weightBytes ?? 4 * 1024 * 1024;
  if (!Number.isSafeInteger(shards) || shards < 1) {
    throw new RangeError(`Cannot make ${shards} shards`);
  }
  if (!Number.isSafeInteger(weightBytes) || weightBytes < 2 * shards) {
    throw new RangeError(`Cannot make ${shards} shards of ${weightBytes} bytes`);
  }
  const presetName = spec.preset ?? "llama-3.1-8b-instruct";
  const preset = MODEL_PRESETS[presetName];
  if (preset === undefined) {
    throw new RangeError(
      `Unknown model preset ${presetName}: one of ${Object.keys(MODEL_PRESETS).join(", ")}`,
    );
  }
  const config = { ...preset.config, ...spec.config };
  const seed = spec.seed ?? seedOf(spec.repo);
  const tensors = layout(shards, weightBytes);
  const name = (i: number) =>
    `model-${String(i + 1).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.safetensors`;
  const files = await Promise.all(tensors.map((t, i) => shardFile(name(i), t, (seed + i) >>> 0)));
  const weightMap: Record<string, string> = {};
  tensors.forEach((ts, i) => ts.forEach((t) => (weightMap[t.name] = name(i))));
  const index = {
    metadata: {
      total_size: spec.claimedBytes ?? tensors.flat().reduce((sum, t) => sum + t.bytes, 0),
    },
    weight_map: weightMap,
  };
  const json = (v: unknown) => JSON.stringify(v, null, 2) + "\n";
  files.push(
    await smallFile("config.json", json(config)),
    await smallFile("model.safetensors.index.json", json(index)),
    await smallFile(
      "generation_config.json",
      json({
        bos_token_id: config.bos_token_id,
        eos_token_id: config.eos_token_id,
        transformers_version: config.transformers_version,
      }),
    ),
    await smallFile(
      "tokenizer_config.json",
      json({
        model_max_length: config.max_position_embeddings,
        tokenizer_class: "PreTrainedTokenizerFast",
      }),
    ),
    await smallFile(
      "tokenizer.json",
      json({
        version: "1.0",
        added_tokens: [],
        model: { type: "BPE", vocab: { "<s>": 0, "</s>": 1, a: 2, b: 3 }, merges: ["a b"] },
      }),
    ),
    await smallFile(".gitattributes", "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"),
  );
  return files;
}

/** A repo holding a synthetic model (one commit, `main` pointing at it). */
export async function syntheticModel(spec: SyntheticModelSpec): Promise<FakeRepo> {
  return fakeRepo(spec.repo, await syntheticFiles(spec), spec);
}
