/**
 * The hub client llmgw's control plane and agents use: it resolves a
 * revision (branch, tag or commit) to a {@link RepoSnapshot} with the
 * revision API, reads one file's metadata with `HEAD` on `resolve`, and hands
 * out the {@link ByteSource} that reads byte ranges (`models/hub_byte_source.ts`).
 * The protocol it follows, with sources: docs/models.md, "The hub's
 * protocol, as llmgw speaks it". `fetch` is injected, so tests run it
 * against the fake hub in-process.
 *
 * @module
 */
import type { ByteSource } from "./byte_source.ts";
import type { HubConfig } from "./hub_config.ts";
import { errorFromAnswer, HubAnswerError, type HubError } from "./hub_errors.ts";
import { HubByteSource } from "./hub_byte_source.ts";
import {
  DEFAULT_REVISION,
  HEADER_LINKED_ETAG,
  HEADER_LINKED_SIZE,
  HEADER_REPO_COMMIT,
  normalizeEtag,
  REPO_ID_PATTERN,
  resolvePath,
  revisionApiPath,
} from "./hub_protocol.ts";
import { discardBody, hubRequest, type HubTransport } from "./hub_request.ts";
import { snapshotFromRevisionApi } from "./hub_revision.ts";
import type { RepoSnapshot } from "./repo_snapshot.ts";

/** How a {@link HubClient} is built. */
export interface HubClientOptions {
  /** The endpoint and token (`hubConfig` in `models/hub_config.ts`). */
  config: HubConfig;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch;
  /** The `User-Agent`; `llmgw` by default. */
  userAgent?: string;
}

/** One file's metadata from `HEAD` on `resolve` (huggingface_hub's `HfFileMetadata`). */
export interface HubFileMetadata {
  /** The commit the revision resolved to (`X-Repo-Commit`). */
  commit: string;
  /** `X-Linked-Etag` (an LFS file's SHA-256) or else `ETag` (the git blob id), unquoted. */
  etag: string;
  /** `X-Linked-Size`, or else `Content-Length` of a non-redirect answer. */
  size: number;
  /** Where the bytes are: the redirect's target, or the resolve URL itself. */
  location: string;
}

/** Redirects followed on the endpoint's origin before giving up. */
const MAX_REDIRECTS = 5;

/** The largest revision listing read (a repo of tens of thousands of files fits). */
const MAX_LISTING_BYTES = 32 * 1024 * 1024;

/** A client of one hub (or mirror). */
export class HubClient {
  readonly #transport: HubTransport;

  /** Builds one; nothing is sent until asked. */
  constructor(options: HubClientOptions) {
    this.#transport = {
      config: options.config,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      userAgent: options.userAgent ?? "llmgw",
    };
  }

  /** The endpoint, for messages (never with a token). */
  get endpoint(): string {
    return this.#transport.config.endpoint;
  }

  /** The commit `revision` of `repo` points at now, with every file's size and hashes. */
  async resolveRevision(
    repo: string,
    revision: string = DEFAULT_REVISION,
    signal?: AbortSignal,
  ): Promise<RepoSnapshot> {
    checkRepo(repo);
    const url = `${this.endpoint}${revisionApiPath(repo, revision)}?blobs=true`;
    const { response } = await this.#sameOrigin(url, "GET", `model ${repo}`, signal);
    if (response.status !== 200) {
      await discardBody(response);
      throw this.#refusal(response, repo, revision);
    }
    const where = `hub ${this.endpoint} (model ${repo} revision ${revision})`;
    const text = await readText(response, MAX_LISTING_BYTES, where);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new HubAnswerError(`${where} answered a revision listing that is not JSON`);
    }
    return snapshotFromRevisionApi(body, repo, revision, where);
  }

  /**
   * `HEAD` on `resolve/{revision}/{file}`: the commit, ETag, size and where
   * the bytes are. Follows redirects on the endpoint's own origin (a renamed
   * repo) and stops at one to another host (the CDN), as huggingface_hub does.
   */
  async fileMetadata(
    repo: string,
    revision: string,
    file: string,
    signal?: AbortSignal,
  ): Promise<HubFileMetadata> {
    checkRepo(repo);
    const asked = `${this.endpoint}${resolvePath(repo, revision, file)}`;
    const { response, url } = await this.#sameOrigin(
      asked,
      "HEAD",
      `file ${file} of model ${repo}`,
      signal,
    );
    await discardBody(response);
    const location = response.headers.get("Location");
    const redirect = response.status >= 300 && response.status < 400 && location !== null;
    if (!redirect && response.status !== 200) throw this.#refusal(response, repo, revision, file);
    const commit = response.headers.get(HEADER_REPO_COMMIT);
    const etag = normalizeEtag(
      response.headers.get(HEADER_LINKED_ETAG) ?? response.headers.get("ETag"),
    );
    const sizeText = response.headers.get(HEADER_LINKED_SIZE) ??
      (redirect ? null : response.headers.get("Content-Length"));
    const size = sizeText === null ? NaN : Number(sizeText);
    const where = `hub ${this.endpoint} (file ${file} of model ${repo} revision ${revision})`;
    if (commit === null) throw new HubAnswerError(`${where} sent no ${HEADER_REPO_COMMIT}`);
    if (etag === null) throw new HubAnswerError(`${where} sent no ETag`);
    if (!Number.isSafeInteger(size) || size < 0) throw new HubAnswerError(`${where} sent no size`);
    return { commit, etag, size, location: redirect ? new URL(location, url).toString() : url };
  }

  /**
   * Sends `method` to `url`, following redirects that stay on the same
   * origin (a renamed repo) and stopping at one to another host (the CDN),
   * as huggingface_hub's `_httpx_follow_relative_redirects_with_backoff` does.
   */
  async #sameOrigin(
    url: string,
    method: "GET" | "HEAD",
    what: string,
    signal?: AbortSignal,
  ): Promise<{ response: Response; url: string }> {
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const response = await hubRequest(this.#transport, url, { method, signal });
      const location = response.headers.get("Location");
      if (response.status < 300 || response.status > 399 || location === null) {
        return { response, url };
      }
      const next = new URL(location, url);
      if (next.origin !== new URL(url).origin) return { response, url };
      await discardBody(response);
      url = next.toString();
    }
    throw new HubAnswerError(
      `hub ${this.endpoint} redirected ${what} more than ${MAX_REDIRECTS} times`,
    );
  }

  /** The source that reads byte ranges of files from this hub. */
  byteSource(): ByteSource {
    return new HubByteSource(this.#transport);
  }

  #refusal(response: Response, repo: string, revision: string, file?: string): HubError {
    return errorFromAnswer(response, {
      endpoint: this.endpoint,
      repo,
      revision,
      file,
      hadToken: this.#transport.config.token !== undefined,
    });
  }
}

/** Refuses a repo id that is not `org/name` before anything is sent. */
export function checkRepo(repo: string): void {
  if (!REPO_ID_PATTERN.test(repo)) {
    throw new HubAnswerError(
      `Cannot fetch model ${
        JSON.stringify(repo)
      }: a hub model id is org/name (letters, digits, - _ .)`,
    );
  }
}

async function readText(response: Response, limit: number, where: string): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) return "";
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      throw new HubAnswerError(`${where} answered a revision listing over ${limit} bytes`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}
