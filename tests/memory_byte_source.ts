/**
 * A ByteSource in memory for the model cache's tests: synthetic files of
 * deterministic content, every read recorded, and faults injected by file
 * and offset (refused, broken midway, short, too long, wrong bytes, hung
 * until aborted, from the start or after some bytes). Like a real source,
 * it never serves a range past the file's end and stops when the signal
 * aborts.
 *
 * @module
 */
import type { ByteSource, SourceKind } from "../models/byte_source.ts";
import { gitBlobHash, hashBytes, sha256Hash } from "../models/file_hash.ts";
import type { RepoFile, RepoSnapshot } from "../models/repo_snapshot.ts";

/** A fault a read meets when it covers `offset` of `file` (any file, any offset when absent). */
export interface SourceFault {
  /**
   * `refuse`: the connection fails (try again later); `deny`: the source
   * answers for good that it will not serve the file (`retryable: false`, as
   * the hub's 404 or gated answers are).
   */
  kind: "refuse" | "deny" | "break_at" | "short" | "long" | "corrupt" | "hang";
  file?: string;
  offset?: number;
  /** Reads it applies to before it stops (default: all). */
  times?: number;
}

/** One read a source was asked for. */
export interface SourceRead {
  file: string;
  start: number;
  end: number;
}

/** Deterministic bytes of a synthetic file: a different sequence per seed. */
export function syntheticBytes(size: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

/** A RepoFile for `bytes`: in LFS (SHA-256) when `lfs`, else a small git file. */
export function repoFileOf(path: string, bytes: Uint8Array, lfs: boolean): RepoFile {
  const blobId = hashBytes(gitBlobHash(bytes.length), bytes);
  return lfs
    ? { path, size: bytes.length, blobId, sha256: hashBytes(sha256Hash(), bytes) }
    : { path, size: bytes.length, blobId };
}

/** A synthetic model revision: its snapshot and each file's content by path. */
export function syntheticSnapshot(
  repo: string,
  commit: string,
  files: { path: string; size: number; seed: number; lfs?: boolean }[],
): { snapshot: RepoSnapshot; contents: Map<string, Uint8Array> } {
  const contents = new Map<string, Uint8Array>();
  const list = files.map((f) => {
    const bytes = syntheticBytes(f.size, f.seed);
    contents.set(f.path, bytes);
    return repoFileOf(f.path, bytes, f.lfs ?? f.size > 1024);
  }).sort((a, b) => (a.path < b.path ? -1 : 1));
  return { snapshot: { repo, commit, files: list }, contents };
}

/** A source serving `contents` (by file path), with `faults`. */
export class MemoryByteSource implements ByteSource {
  readonly kind: SourceKind;
  readonly name: string;
  /** Every read asked for, in order. */
  readonly reads: SourceRead[] = [];
  /** Faults still to meet; edit freely between calls. */
  faults: SourceFault[];
  /** Called at the start of every read (tests check the cache's state here). */
  onRead?: (read: SourceRead) => void | Promise<void>;
  /** Called when a read's stream begins to hang (a `hang` fault reached). */
  onHang?: (read: SourceRead) => void;
  /** Bytes per streamed piece. */
  pieceBytes = 256;
  readonly #contents: Map<string, Uint8Array>;

  /** A source named `name` over `contents`. */
  constructor(
    name: string,
    contents: Map<string, Uint8Array>,
    faults: SourceFault[] = [],
    kind: SourceKind = "peer",
  ) {
    this.name = name;
    this.kind = kind;
    this.#contents = contents;
    this.faults = faults;
  }

  #fault(file: string, start: number, end: number): SourceFault | null {
    const i = this.faults.findIndex((f) =>
      (f.file === undefined || f.file === file) &&
      (f.offset === undefined || (f.offset >= start && f.offset < end)) &&
      (f.times === undefined || f.times > 0)
    );
    if (i < 0) return null;
    const f = this.faults[i];
    if (f.times !== undefined) f.times--;
    return f;
  }

  async read(
    _repo: string,
    _commit: string,
    file: RepoFile,
    start: number,
    end: number,
    signal: AbortSignal,
  ): Promise<ReadableStream<Uint8Array>> {
    const read = { file: file.path, start, end };
    this.reads.push(read);
    await this.onRead?.(read);
    signal.throwIfAborted();
    const bytes = this.#contents.get(file.path);
    if (bytes === undefined) throw new Error(`${this.name}: no file ${file.path}`);
    if (start < 0 || end > bytes.length || start > end) {
      throw new Error(
        `${this.name}: range ${start}-${end} outside ${file.path} (${bytes.length} B)`,
      );
    }
    const fault = this.#fault(file.path, start, end);
    if (fault?.kind === "refuse") throw new Error(`${this.name}: connection refused`);
    if (fault?.kind === "deny") {
      const answer = `${this.name}: 403 access to model is restricted: set HF_TOKEN`;
      throw Object.assign(new Error(answer), { retryable: false });
    }
    let body = bytes.slice(start, end);
    let breakAt: number | null = null;
    const cut = (fault?.offset ?? start + Math.floor((end - start) / 2)) - start;
    if (fault?.kind === "short") body = body.slice(0, cut);
    if (fault?.kind === "break_at") breakAt = cut;
    if (fault?.kind === "long") body = new Uint8Array([...body, 0]);
    if (fault?.kind === "corrupt") body = body.map((b, i) => (i === 0 ? b ^ 0xff : b));
    // A hang sends the bytes before its offset (none without one), then nothing until aborted.
    const hangAt = fault?.kind === "hang" ? (fault.offset === undefined ? 0 : cut) : null;
    const piece = this.pieceBytes;
    const name = this.name;
    const onHang = this.onHang;
    let at = 0;
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (signal.aborted) return controller.error(signal.reason);
        if (hangAt !== null && at >= hangAt) {
          onHang?.(read);
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
          return controller.error(signal.reason);
        }
        if (breakAt !== null && at >= breakAt) {
          return controller.error(new Error(`${name}: connection reset`));
        }
        if (at >= body.length) return controller.close();
        const stop = Math.min(body.length, at + piece, breakAt ?? Infinity, hangAt || Infinity);
        controller.enqueue(body.slice(at, stop));
        at = stop;
      },
    });
  }
}
