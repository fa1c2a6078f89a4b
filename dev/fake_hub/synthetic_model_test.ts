import { createHash } from "node:crypto";
import { gitBlobHash, hashBytes } from "../../models/file_hash.ts";
import { assertEquals, assertOk } from "../../tests/assert.ts";
import { inProcessFakeHub } from "./fake_hub_server.ts";
import { lfsPointer } from "./fake_repo.ts";
import { deterministicBytes, syntheticModel } from "./synthetic_model.ts";

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c.slice());
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** Parses a safetensors file as the format defines it (and as safetensors' own loader checks it). */
function parseSafetensors(
  bytes: Uint8Array,
): Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const body = bytes.byteLength - 8 - n;
  let expected = 0;
  const tensors = Object.entries(header).filter(([k]) => k !== "__metadata__")
    .sort(([, a], [, b]) =>
      (a as { data_offsets: number[] }).data_offsets[0] -
      (b as { data_offsets: number[] }).data_offsets[0]
    );
  for (const [name, t] of tensors) {
    const { dtype, shape, data_offsets: [from, to] } = t as {
      dtype: string;
      shape: number[];
      data_offsets: number[];
    };
    assertEquals(from, expected, `${name} starts where the previous tensor ended`);
    assertEquals(
      to - from,
      shape.reduce((a, b) => a * b, 1) * (dtype === "BF16" ? 2 : 4),
      `${name} size`,
    );
    expected = to;
  }
  assertEquals(expected, body, "the tensors fill the body exactly");
  return header;
}

Deno.test("a synthetic model's shards are valid safetensors and the index maps every tensor to its shard", async () => {
  const repo = await syntheticModel({ repo: "org/tiny", shards: 3, weightBytes: 300_000 });
  const files = Object.values(repo.commits)[0];
  const shards = files.filter((f) => f.path.endsWith(".safetensors"));
  assertEquals(shards.map((f) => f.path), [
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
  ]);
  const index = JSON.parse(
    new TextDecoder().decode(
      await collect(
        files.find((f) => f.path === "model.safetensors.index.json")!.read(0, Infinity),
      ),
    ),
  );
  let total = 0;
  for (const shard of shards) {
    const header = parseSafetensors(await collect(shard.read(0, shard.size)));
    for (const [name, t] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      assertEquals(index.weight_map[name], shard.path);
      total += t.data_offsets[1] - t.data_offsets[0];
    }
  }
  assertEquals(index.metadata.total_size, total);
  assertEquals(total, 300_000);
  const config = JSON.parse(
    new TextDecoder().decode(
      await collect(files.find((f) => f.path === "config.json")!.read(0, Infinity)),
    ),
  );
  assertEquals(config.architectures, ["LlamaForCausalLM"]);
});

Deno.test("any range of a shard is the same bytes as that part of the whole", async () => {
  const repo = await syntheticModel({ repo: "org/tiny", shards: 1, weightBytes: 200_000, seed: 7 });
  const shard = Object.values(repo.commits)[0].find((f) => f.path.endsWith(".safetensors"))!;
  const whole = await collect(shard.read(0, shard.size));
  assertEquals(whole.byteLength, shard.size);
  for (
    const [s, e] of [[0, 1], [3, 9000], [4095, 4097], [65_535, 140_001], [
      shard.size - 5,
      shard.size,
    ]]
  ) {
    assertEquals(await collect(shard.read(s, e)), whole.subarray(s, e), `range ${s}-${e}`);
  }
  // The seed decides the bytes: another seed, other bytes.
  const other = await collect(deterministicBytes(8, 0, 64));
  assertOk(!(await collect(deterministicBytes(7, 0, 64))).every((b, i) => b === other[i]));
});

Deno.test("the hashes the revision API lists are those of the bytes resolve serves", async () => {
  const repo = await syntheticModel({ repo: "org/tiny", shards: 2, weightBytes: 100_000 });
  const hub = inProcessFakeHub({ repos: [repo] });
  const listing =
    await (await hub.fetch(`${hub.endpoint}/api/models/org/tiny/revision/main?blobs=true`)).json();
  assertEquals(listing.sha, repo.refs.main);
  for (const s of listing.siblings) {
    let response = await hub.fetch(
      `${hub.endpoint}/org/tiny/resolve/${listing.sha}/${s.rfilename}`,
      { redirect: "manual" },
    );
    if (response.status === 302) response = await hub.fetch(response.headers.get("Location")!);
    assertEquals(response.status, 200, s.rfilename);
    const bytes = new Uint8Array(await response.arrayBuffer());
    assertEquals(bytes.byteLength, s.size, `${s.rfilename} size`);
    if (s.lfs) {
      assertEquals(
        createHash("sha256").update(bytes).digest("hex"),
        s.lfs.sha256,
        `${s.rfilename} sha256`,
      );
      const pointer = new TextEncoder().encode(lfsPointer(s.lfs.sha256, s.size));
      assertEquals(
        hashBytes(gitBlobHash(pointer.byteLength), pointer),
        s.blobId,
        `${s.rfilename} pointer blob id`,
      );
      assertEquals(s.lfs.pointerSize, pointer.byteLength);
    } else {
      assertEquals(
        hashBytes(gitBlobHash(bytes.byteLength), bytes),
        s.blobId,
        `${s.rfilename} blob id`,
      );
    }
  }
  assertOk(
    listing.siblings.some((s: { lfs?: unknown }) => s.lfs) &&
      listing.siblings.some((s: { lfs?: unknown }) => !s.lfs),
  );
});

Deno.test("a synthetic model's index may claim the real model's size while its files stay small", async () => {
  const repo = await syntheticModel({
    repo: "org/claims",
    shards: 2,
    weightBytes: 100_000,
    claimedBytes: 16_060_522_496,
  });
  const files = Object.values(repo.commits)[0];
  const index = files.find((f) => f.path === "model.safetensors.index.json")!;
  const text = new TextDecoder().decode(await collect(index.read(0, index.size)));
  assertEquals(JSON.parse(text).metadata.total_size, 16_060_522_496);
  const shardBytes = files.filter((f) => f.path.endsWith(".safetensors"))
    .reduce((n, f) => n + f.size, 0);
  assertOk(shardBytes < 200_000, `${shardBytes}`);
});
