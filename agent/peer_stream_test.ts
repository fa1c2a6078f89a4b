/**
 * A peer serves a chunk's bytes as they are written (issue #25 item 3's
 * pipelining, docs/models.md "Sources"), over real TLS sockets with the
 * cluster's certificates: the peer route streams a chunk a test writer is
 * writing, never past what it wrote (the part file holds wrong bytes
 * beyond, as a hole would); a try that fails ends the stream with an error
 * the follower retries, and the next try is streamed from the chunk's start;
 * a follower's model cache fetches through a peer whose own download is
 * held in the middle of a chunk, taking that chunk's first half before the
 * peer has the second; and when the peer's own source breaks mid-chunk, the
 * follower's stream of it errors and goes on from its byte. Every listener
 * is shut in a `finally`.
 */
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { MemoryByteSource, syntheticSnapshot } from "../tests/memory_byte_source.ts";
import { testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { withPeerRoute } from "../tests/peer_route.ts";
import { until } from "../tests/until.ts";
import type { ByteSource } from "../models/byte_source.ts";
import { PeerByteSource, PeerSourceError } from "../models/peer_byte_source.ts";
import { peerBlobPath } from "../models/peer_protocol.ts";
import { blobKey, type RepoFile, type RepoSnapshot } from "../models/repo_snapshot.ts";
import { PeerServer } from "./peer_server.ts";
import { denoCacheFs } from "./model_cache/cache_fs.ts";
import { CacheLayout } from "./model_cache/cache_layout.ts";
import { recordHeader, recordLine } from "./model_cache/chunk_record.ts";
import { type ChunkTry, WrittenChunks } from "./model_cache/written_chunks.ts";

const REPO = "acme/tiny-llm";
const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const MIB = 2 ** 20;
const KIB = 1024;

/** A peer route over `root` with `written`, served over mTLS; node b's fetch. */
async function withPeer(
  root: string,
  written: WrittenChunks,
  body: (o: { url: string; peer: PeerServer; fetch: typeof fetch }) => Promise<void>,
  slots: { maxUploads?: number; maxWaiting?: number; nextTryWaitMs?: number } = {},
): Promise<void> {
  const peer = new PeerServer({ layout: new CacheLayout(root), written, ...slots });
  await withPeerRoute(peer, ({ url, fetch }) => body({ url, peer, fetch }), 0);
}

/** A 3 MiB + 100 file downloading in 1 MiB chunks: chunk 0 recorded, the rest wrong bytes for now. */
async function downloading(root: string) {
  const { snapshot, contents } = syntheticSnapshot(REPO, COMMIT, [
    { path: "model.safetensors", size: 3 * MIB + 100, seed: 9 },
  ]);
  const file = snapshot.files[0];
  const bytes = contents.get(file.path)!;
  const layout = new CacheLayout(root);
  await Deno.mkdir(`${layout.repoDir(REPO)}/blobs`, { recursive: true });
  const part = layout.partPath(REPO, file);
  // Past what a try has written, a reader would read these (a hole reads zeros).
  const wrong = bytes.slice();
  wrong.fill(0xee, MIB);
  await Deno.writeFile(part, wrong);
  await Deno.writeTextFile(
    layout.chunksPath(REPO, file),
    recordHeader(file.size, MIB) + recordLine(0),
  );
  /** The writer: bytes `from` … `to - 1` written at their offset, then the try told. */
  const write = async (t: ChunkTry, to: number) => {
    const w = await denoCacheFs.openAt(part, t.written);
    try {
      await w.write(bytes.slice(t.written, to));
    } finally {
      w.close();
    }
    t.advance(to);
  };
  return { file, bytes, part, layout, write };
}

/** The longest one read of a test's stream may take before the test fails. */
const READ_BOUND_MS = 20_000;

/** `work`, or an error once {@link READ_BOUND_MS} pass first. */
async function bounded<T>(work: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`nothing for ${READ_BOUND_MS} ms`)), READ_BOUND_MS);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `reader`'s next read, bounded. */
const nextRead = (reader: ReadableStreamDefaultReader<Uint8Array>) => bounded(reader.read());

/** Reads `reader` until `count` bytes came in all (bounded: at most `count` reads, each in time). */
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  got: Uint8Array[],
  count: number,
): Promise<number> {
  let n = got.reduce((s, b) => s + b.length, 0);
  for (let i = 0; i < count && n < count; i++) {
    const { done, value } = await nextRead(reader);
    if (done) break;
    got.push(value);
    n += value.length;
  }
  return n;
}

function joined(parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(parts.flatMap((p) => [...p]));
}

/**
 * Try `t` writes 300 KiB; `reader` takes the source's first 256 KiB piece
 * (models/byte_slice.ts) into `got`; then the upload waits for more.
 */
async function heldMidChunk(
  peer: PeerServer,
  reader: ReadableStreamDefaultReader<Uint8Array>,
  write: (t: ChunkTry, to: number) => Promise<void>,
  t: ChunkTry,
  got: Uint8Array[] = [],
): Promise<void> {
  await write(t, t.written + 300 * KIB);
  assertEquals(await readUntil(reader, got, 256 * KIB), 256 * KIB);
  await until("the upload waiting for more", () => peer.stats().waiting === 1);
}

/** `reader`'s stream ends with an error the follower retries, and the upload's slots are freed. */
async function assertCutRetryably(
  peer: PeerServer,
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<void> {
  const e = await assertRejects(() => readUntil(reader, [], MIB), PeerSourceError);
  assertOk((e as PeerSourceError).retryable, (e as Error).message);
  await until("the upload's slot released", () => peer.stats().uploads === 0);
  assertEquals(peer.stats().waiting, 0);
}

Deno.test("peer route: a chunk being written is streamed as it lands, never past what was written", async () => {
  await withTempDir(async (root) => {
    const { file, bytes, part, layout, write } = await downloading(root);
    const written = new WrittenChunks();
    const chunk1 = written.begin(part, MIB, 2 * MIB, MIB);
    await withPeer(root, written, async ({ url, peer, fetch }) => {
      const res = await fetch(url + peerBlobPath(REPO, blobKey(file), file.size), {
        headers: { range: `bytes=0-${2 * MIB - 1}` },
      });
      assertEquals(res.status, 206);
      const reader = res.body!.getReader();
      const got: Uint8Array[] = [];
      // Chunk 0 is recorded: all of it comes before chunk 1 has a byte.
      assertEquals(await readUntil(reader, got, MIB), MIB);
      await until("the upload waiting for chunk 1", () => peer.stats().waiting === 1, {
        describe: () => JSON.stringify(peer.stats()),
      });
      await write(chunk1, MIB + 300 * KIB);
      assertEquals(await readUntil(reader, got, MIB + 300 * KIB), MIB + 300 * KIB);
      // Waiting again: the 300 KiB written, and not a byte of what lies past them in the file.
      await until("the upload waiting for more", () => peer.stats().waiting === 1);
      assertEquals(joined(got), bytes.slice(0, MIB + 300 * KIB));
      await write(chunk1, 2 * MIB);
      await Deno.writeTextFile(layout.chunksPath(REPO, file), recordLine(1), { append: true });
      chunk1.complete();
      assertEquals(await readUntil(reader, got, 2 * MIB), 2 * MIB);
      assertEquals((await nextRead(reader)).done, true);
      assertEquals(joined(got), bytes.slice(0, 2 * MIB));
      const s = peer.stats();
      assertEquals([s.rangesServed, s.rangesStreamed, s.uploads, s.waiting], [1, 1, 0, 0]);
      // A chunk no try is writing is still pending.
      const later = await fetch(url + peerBlobPath(REPO, blobKey(file), file.size), {
        headers: { range: `bytes=${2 * MIB}-${2 * MIB + 9}` },
      });
      assertEquals([later.status, (await later.json()).error.code], [503, "range_pending"]);
    });
  });
});

Deno.test("peer route: a chunk's try that fails holds its streams until the next try, which they follow; a new round or no next try in time ends them retryably", async () => {
  await withTempDir(async (root) => {
    const { file, bytes, part, write } = await downloading(root);
    const written = new WrittenChunks();
    const first = written.begin(part, MIB, 2 * MIB, MIB);
    await withPeer(root, written, async ({ url, peer, fetch }) => {
      const source = new PeerByteSource({ nodeId: "a", url, fetch });
      const signal = new AbortController().signal;
      const stream = async (from: number) =>
        (await bounded(source.read(REPO, COMMIT, file, from, from + MIB, signal))).getReader();
      const reader = await stream(MIB);
      const got: Uint8Array[] = [];
      await heldMidChunk(peer, reader, write, first, got);
      first.abandon("hub sent nothing of model.safetensors for 60 s");
      // Between tries nothing new is served of the chunk: that follower asks again shortly.
      const between = await fetch(url + peerBlobPath(REPO, blobKey(file), file.size), {
        headers: { range: `bytes=${MIB}-${MIB + 9}` },
      });
      assertEquals([between.status, (await between.json()).error.code], [503, "range_pending"]);
      assertEquals([peer.stats().uploads, peer.stats().waiting], [1, 1]);
      // The next try keeps the 300 KiB written and goes on: so does the stream, uncut.
      const second = written.begin(part, MIB, 2 * MIB, MIB + 300 * KIB);
      await write(second, 2 * MIB);
      second.complete();
      assertEquals(await readUntil(reader, got, MIB), MIB);
      assertEquals(joined(got), bytes.slice(MIB, 2 * MIB));

      // A new round (the chunk begun again below the byte sent): the stream is cut, retryably.
      const third = written.begin(part, 2 * MIB, 3 * MIB, 2 * MIB);
      const cut = await stream(2 * MIB);
      await heldMidChunk(peer, cut, write, third);
      third.abandon("the hash did not match: downloading again");
      written.begin(part, 2 * MIB, 3 * MIB, 2 * MIB);
      await assertCutRetryably(peer, cut);
      // The wait for a next try is far past a read's bound: the cut above was the new round.
    }, { nextTryWaitMs: 60_000 });
  });
});

Deno.test("peer route: a failed try with no next try within the wait ends its streams retryably", async () => {
  await withTempDir(async (root) => {
    const { file, part, write } = await downloading(root);
    const written = new WrittenChunks();
    const first = written.begin(part, MIB, 2 * MIB, MIB);
    await withPeer(root, written, async ({ url, peer, fetch }) => {
      const source = new PeerByteSource({ nodeId: "a", url, fetch });
      const signal = new AbortController().signal;
      const reader = (await bounded(source.read(REPO, COMMIT, file, MIB, 2 * MIB, signal)))
        .getReader();
      await heldMidChunk(peer, reader, write, first);
      first.abandon("the download stopped");
      await assertCutRetryably(peer, reader);
    }, { nextTryWaitMs: 300 });
  });
});

Deno.test("peer route: waiting uploads have their own slots; recorded bytes are served meanwhile, and a follower leaving mid-wait frees its slot", async () => {
  await withTempDir(async (root) => {
    const { file, part } = await downloading(root);
    const written = new WrittenChunks();
    const chunk1 = written.begin(part, MIB, 2 * MIB, MIB);
    await withPeer(root, written, async ({ url, peer, fetch }) => {
      const ask = (first: number, last: number) =>
        bounded(fetch(url + peerBlobPath(REPO, blobKey(file), file.size), {
          headers: { range: `bytes=${first}-${last}` },
        }));
      const refusal = async (res: Response) => [res.status, (await res.json()).error.code];
      const waiting = await ask(MIB, 2 * MIB - 1);
      assertEquals(waiting.status, 206);
      const reader = waiting.body!.getReader();
      await until("the upload waiting for chunk 1", () => peer.stats().waiting === 1);
      // The one reading slot is free: recorded chunk 0 is served while chunk 1's upload waits.
      const recorded = await ask(0, 9);
      assertEquals(recorded.status, 206);
      assertEquals((await bounded(recorded.bytes())).length, 10);
      // The one waiting slot is taken.
      assertEquals(await refusal(await ask(MIB, MIB + 9)), [503, "busy"]);
      // The follower goes away mid-wait: its slot is free again.
      await reader.cancel();
      await until("the waiting upload gone", () => {
        const s = peer.stats();
        return s.uploads === 0 && s.waiting === 0;
      }, { describe: () => JSON.stringify(peer.stats()) });
      const again = await ask(MIB, MIB + 9);
      assertEquals(again.status, 206);
      await again.body!.cancel();
      await until("the second upload gone", () => peer.stats().uploads === 0);
      assertEquals(chunk1.state, "writing");
    }, { maxUploads: 1, maxWaiting: 1 });
  });
});

/** `fetch`, adding to `received` each byte of a 206 answer, by the range asked for. */
function countingFetch(fetch: typeof globalThis.fetch, received: Map<string, number>) {
  const counting: typeof globalThis.fetch = async (input, init) => {
    const res = await fetch(input, init);
    const range = new Headers(init?.headers).get("range") ?? "";
    if (res.status !== 206 || res.body === null) return res;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(piece, c) {
          received.set(range, (received.get(range) ?? 0) + piece.length);
          c.enqueue(piece);
        },
      }),
    );
    return new Response(counted, { status: res.status, headers: res.headers });
  };
  return counting;
}

/** `inner`, holding the read from byte 0 after `holdAt` bytes until `gate` resolves. */
function heldAt(inner: ByteSource, holdAt: number, gate: Promise<void>): ByteSource {
  return {
    kind: inner.kind,
    name: inner.name,
    async read(repo, commit, file, start, end, signal) {
      const stream = await inner.read(repo, commit, file, start, end, signal);
      if (start !== 0) return stream;
      let at = 0;
      return stream.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          async transform(piece, controller) {
            if (at + piece.length > holdAt && at < holdAt + 1) await gate;
            at += piece.length;
            controller.enqueue(piece);
          },
        }),
      );
    },
  };
}

/** Caches A and B of {@link throughHeldPeer}, and A's peer route. */
interface HeldChain {
  peer: PeerServer;
  a: ReturnType<typeof testCache>;
  b: ReturnType<typeof testCache>;
}

/**
 * A chain of two over `dir`, 1 MiB chunks: A fetches `snapshot` from `origin`,
 * held at half of chunk 0 until the gate opens, and streams what it writes on
 * its peer route; B fetches through A alone. Once B has that half, `held`
 * runs and the gate opens; both finish with the snapshot's bytes, then `done`
 * runs. Both fetches are stopped and settled even when a check fails.
 */
async function throughHeldPeer(
  dir: string,
  snapshot: RepoSnapshot,
  contents: Map<string, Uint8Array>,
  origin: ByteSource,
  checks: { held?: (c: HeldChain) => void; done: (c: HeldChain) => void },
): Promise<void> {
  let open = () => {};
  const gate = new Promise<void>((r) => open = r);
  const written = new WrittenChunks();
  const a = testCache(`${dir}/a`, { chunkBytes: MIB, written });
  const b = testCache(`${dir}/b`, { chunkBytes: MIB });
  await withPeer(`${dir}/a`, written, async ({ url, peer, fetch }) => {
    // What B received of each range it asked A for.
    const received = new Map<string, number>();
    const stop = new AbortController();
    const peerA = new PeerByteSource({ nodeId: "a", url, fetch: countingFetch(fetch, received) });
    const fetchingA = a.cache.ensureSnapshot(snapshot, [heldAt(origin, MIB / 2, gate)], {
      signal: stop.signal,
    });
    const fetchingB = b.cache.ensureSnapshot(snapshot, [peerA], { signal: stop.signal });
    try {
      await until(
        "half of chunk 0 at B",
        () => (received.get(`bytes=0-${MIB - 1}`) ?? 0) >= MIB / 2,
        { describe: () => JSON.stringify([...received, ["stats", peer.stats()]]) },
      );
      checks.held?.({ peer, a, b });
      open();
      const [pathA, pathB] = await Promise.all([fetchingA, fetchingB]);
      for (const file of snapshot.files) {
        const want = contents.get(file.path)!;
        assertEquals(await Deno.readFile(`${pathA}/${file.path}`), want);
        assertEquals(await Deno.readFile(`${pathB}/${file.path}`), want);
      }
      checks.done({ peer, a, b });
    } finally {
      open();
      stop.abort();
      await Promise.allSettled([fetchingA, fetchingB]);
    }
  });
}

Deno.test("a follower fetches through a peer mid-chunk: half a chunk arrives before the peer has the rest", async () => {
  await withTempDir(async (dir) => {
    const { snapshot, contents } = syntheticSnapshot(REPO, COMMIT, [
      { path: "model.safetensors", size: 4 * MIB + 77, seed: 21 },
    ]);
    const file: RepoFile = snapshot.files[0];
    const origin = new MemoryByteSource("origin", contents, [], "hub");
    // A writes in 256 KiB steps, the upload's own: of the 512 KiB A holds, B gets all. With
    // smaller pieces the upload's steps could start off them and stop up to 256 KiB short.
    origin.pieceBytes = 256 * KIB;
    await throughHeldPeer(dir, snapshot, contents, origin, {
      // A holds chunk 0 at its middle; B has that half already (before this change: none).
      held: ({ peer }) => assertOk(peer.stats().waiting >= 1, JSON.stringify(peer.stats())),
      done: ({ peer, b }) => {
        assertOk(peer.stats().rangesStreamed >= 1, JSON.stringify(peer.stats()));
        // Every byte B holds came from A, once (no chunk was cut and fetched again).
        assertEquals(peer.stats().bytesServed, file.size);
        assertEquals(b.events.filter((e) => e.kind === "chunk_failed"), []);
      },
    });
  });
});

Deno.test("a peer whose own source breaks mid-chunk: the follower's stream waits for the peer's next try and goes on, nothing failed or fetched twice", async () => {
  await withTempDir(async (dir) => {
    const { snapshot, contents } = syntheticSnapshot(REPO, COMMIT, [
      { path: "model.safetensors", size: 2 * MIB + 5, seed: 33 },
    ]);
    const file: RepoFile = snapshot.files[0];
    // A's origin breaks chunk 0 once at 768 KiB; A takes the rest of it again from there.
    const origin = new MemoryByteSource("origin", contents, [
      { kind: "break_at", offset: 768 * KIB, times: 1 },
    ], "hub");
    // 256 KiB pieces, the upload's step: B's wait for half of chunk 0 is always reached.
    origin.pieceBytes = 256 * KIB;
    // B is streaming chunk 0 from A, its first half taken, when A's try of it breaks (an
    // upload waiting for chunk 1 alone would not do: B's chunk 0 might be past the break).
    await throughHeldPeer(dir, snapshot, contents, origin, {
      done: ({ peer, a, b }) => {
        const failedA = a.events.filter((e) => e.kind === "chunk_failed");
        assertEquals(failedA.length, 1, JSON.stringify(failedA));
        const failedB = b.events.flatMap((e) =>
          e.kind === "chunk_failed" ? [[e.source, e.range]] : []
        );
        // A's blip is not B's failure: its stream waited for A's next try and went on.
        assertEquals(failedB, []);
        // Nothing of chunk 0 was fetched twice.
        assertEquals(peer.stats().bytesServed, file.size);
      },
    });
  });
});
