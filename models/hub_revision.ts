/**
 * Reading the revision API's answer (`/api/models/{repo}/revision/{rev}?blobs=true`)
 * into a {@link RepoSnapshot}, refusing anything the model cache could not
 * trust: a commit that is not 40 hex digits, a file without its size and
 * hashes, a path that would leave the snapshot's directory.
 *
 * @module
 */
import { HubAnswerError } from "./hub_errors.ts";
import { COMMIT_PATTERN } from "./hub_protocol.ts";
import type { RepoFile, RepoSnapshot } from "./repo_snapshot.ts";

const SHA256_PATTERN = /^[0-9a-f]{64}$/;

/** Whether `path` is a plain relative path inside a repo (no `..`, no absolute, no `\`). */
export function isSafeRepoPath(path: string): boolean {
  if (path === "" || path.startsWith("/") || path.includes("\\") || path.includes("\0")) {
    return false;
  }
  return path.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isSize = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * The snapshot in the revision API's answer `body` for `repo`; `where`
 * names the hub and revision in errors. When `revision` is a full commit the
 * answer must be for that commit.
 */
export function snapshotFromRevisionApi(
  body: unknown,
  repo: string,
  revision: string,
  where: string,
): RepoSnapshot {
  const bad = (what: string) =>
    new HubAnswerError(`${where} answered a revision listing llmgw cannot use: ${what}`);
  if (!isRecord(body)) throw bad("not a JSON object");
  const commit = body.sha;
  if (typeof commit !== "string" || !COMMIT_PATTERN.test(commit)) {
    throw bad("sha is not a 40-hex commit");
  }
  if (COMMIT_PATTERN.test(revision) && commit !== revision) {
    throw bad(`sha ${commit} is not the commit asked for`);
  }
  if (!Array.isArray(body.siblings)) throw bad("siblings is not a list");
  const files: RepoFile[] = [];
  const seen = new Set<string>();
  for (const [i, s] of body.siblings.entries()) {
    if (!isRecord(s) || typeof s.rfilename !== "string") {
      throw bad(`siblings[${i}] has no rfilename`);
    }
    const path = s.rfilename;
    if (!isSafeRepoPath(path)) {
      throw bad(`file path ${JSON.stringify(path)} is not a plain relative path`);
    }
    if (seen.has(path)) throw bad(`file ${path} is listed twice`);
    seen.add(path);
    if (!isSize(s.size) || typeof s.blobId !== "string" || !/^[0-9a-f]{40}$/.test(s.blobId)) {
      throw bad(`file ${path} has no size or blobId (does the hub support ?blobs=true?)`);
    }
    const file: RepoFile = { path, size: s.size, blobId: s.blobId };
    if (s.lfs !== undefined && s.lfs !== null) {
      const lfs = s.lfs;
      if (!isRecord(lfs) || typeof lfs.sha256 !== "string" || !SHA256_PATTERN.test(lfs.sha256)) {
        throw bad(`file ${path} has an lfs entry without a sha256`);
      }
      if (lfs.size !== s.size) {
        throw bad(`file ${path} has lfs.size ${lfs.size} but size ${s.size}`);
      }
      file.sha256 = lfs.sha256;
    }
    files.push(file);
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { repo, commit, files };
}
