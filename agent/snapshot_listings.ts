/**
 * The file lists of the snapshots this agent's model cache holds complete
 * (issue #25 items 4, 8): written when a download completes, read when the
 * hub is not needed or not there. The hub's own cache keeps no list of a
 * commit's files, so without one an agent could not tell a complete snapshot
 * from a partial one without asking the hub; with it:
 *
 * - a launch naming a commit whose list is here starts with no hub request
 *   (a second deployment of a revision, an air-gapped host, a restart);
 * - a launch naming a branch (`main`) while the hub is unreachable uses the
 *   commit `refs/<branch>` points at, as huggingface_hub does offline.
 *
 * Kept beside the cache's other records, `<cache>/.llmgw/listings/
 * models--org--name/<commit>.json`, written aside and renamed in.
 *
 * @module
 */
import { dirname } from "node:path";
import type { RepoSnapshot } from "../models/repo_snapshot.ts";
import type { CacheLayout } from "./model_cache/cache_layout.ts";
import { repoFolderName } from "./model_cache/cache_layout.ts";

const COMMIT = /^[0-9a-f]{40}$/;

/** The listings of one cache. */
export class SnapshotListings {
  readonly #layout: CacheLayout;

  /** Listings kept in `layout`'s cache. */
  constructor(layout: CacheLayout) {
    this.#layout = layout;
  }

  #path(repo: string, commit: string): string {
    return `${this.#layout.root}/.llmgw/listings/${repoFolderName(repo)}/${commit}.json`;
  }

  /** The list of `repo`@`commit`, when this cache completed it once; null otherwise or when unreadable. */
  async read(repo: string, commit: string): Promise<RepoSnapshot | null> {
    if (!COMMIT.test(commit)) return null;
    let raw: unknown;
    try {
      raw = JSON.parse(await Deno.readTextFile(this.#path(repo, commit)));
    } catch {
      return null;
    }
    return isSnapshot(raw, repo, commit) ? raw : null;
  }

  /** The commit `refs/<revision>` of `repo` points at in the cache; null when none. */
  async ref(repo: string, revision: string): Promise<string | null> {
    try {
      const commit = (await Deno.readTextFile(this.#layout.refPath(repo, revision))).trim();
      return COMMIT.test(commit) ? commit : null;
    } catch {
      return null;
    }
  }

  /** Records `snapshot`'s list (after its download completed). */
  async write(snapshot: RepoSnapshot): Promise<void> {
    const path = this.#path(snapshot.repo, snapshot.commit);
    await Deno.mkdir(dirname(path), { recursive: true });
    const temp = `${path}.${crypto.randomUUID()}.tmp`;
    await Deno.writeTextFile(temp, JSON.stringify(snapshot));
    await Deno.rename(temp, path);
  }
}

function isSnapshot(raw: unknown, repo: string, commit: string): raw is RepoSnapshot {
  const s = raw as RepoSnapshot;
  return typeof s === "object" && s !== null && s.repo === repo && s.commit === commit &&
    Array.isArray(s.files) &&
    s.files.every((f) =>
      typeof f?.path === "string" && Number.isSafeInteger(f.size) && f.size >= 0 &&
      typeof f.blobId === "string" && (f.sha256 === undefined || typeof f.sha256 === "string")
    );
}
