/**
 * Byte ranges of a model's files from a hub: `GET resolve/{commit}/{file}`
 * with `Range`, following the hub's redirect of a large (LFS) file to its
 * CDN by hand, so the token stays on the endpoint's origin
 * (`models/hub_request.ts`). What comes back is checked before a byte is
 * yielded: a 206's `Content-Range` must be the range asked for, of a file of
 * the listed size; a 200 (a server that ignored `Range`) is cut to the
 * range; a stream never yields more than asked and errors when cut short.
 *
 * @module
 */
import type { ByteSource, SourceKind } from "./byte_source.ts";
import { byteSlice } from "./byte_slice.ts";
import {
  errorFromAnswer,
  HubAnswerError,
  type HubError,
  HubUnreachableError,
  unreachableReason,
} from "./hub_errors.ts";
import { HEADER_REPO_COMMIT, parseContentRange, resolvePath } from "./hub_protocol.ts";
import { discardBody, hubRequest, type HubTransport, isEndpointOrigin } from "./hub_request.ts";
import type { RepoFile } from "./repo_snapshot.ts";

/** Redirects followed before giving up (the hub sends one; a renamed repo adds one). */
const MAX_REDIRECTS = 5;

/** A {@link ByteSource} reading from a hub over HTTP. */
export class HubByteSource implements ByteSource {
  readonly kind: SourceKind = "hub";
  readonly #transport: HubTransport;

  /** Built by `HubClient.byteSource()`. */
  constructor(transport: HubTransport) {
    this.#transport = transport;
  }

  /** The endpoint (never with a token). */
  get name(): string {
    return this.#transport.config.endpoint;
  }

  /** Bytes `start` … `end - 1` of `file` at `commit` of `repo`. */
  async read(
    repo: string,
    commit: string,
    file: RepoFile,
    start: number,
    end: number,
    signal: AbortSignal,
  ): Promise<ReadableStream<Uint8Array>> {
    const what = `bytes ${start}-${
      end - 1
    } of file ${file.path} of model ${repo} revision ${commit}`;
    if (
      !(Number.isSafeInteger(start) && Number.isSafeInteger(end) && start >= 0 &&
        end <= file.size && start <= end)
    ) {
      throw new RangeError(`Cannot read ${what}: the file has ${file.size} bytes`);
    }
    if (start === end) return new ReadableStream({ start: (c) => c.close() });
    const endpoint = this.#transport.config.endpoint;
    let url = `${endpoint}${resolvePath(repo, commit, file.path)}`;
    const headers = { Range: `bytes=${start}-${end - 1}` };
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const response = await hubRequest(this.#transport, url, { method: "GET", headers, signal });
      const from = isEndpointOrigin(this.#transport.config, url)
        ? `hub ${endpoint}`
        : `CDN ${new URL(url).origin}`;
      if (response.status >= 300 && response.status < 400) {
        const location = response.headers.get("Location");
        await discardBody(response);
        if (location === null) {
          throw new HubAnswerError(`${from} redirected ${what} without a Location`);
        }
        url = new URL(location, url).toString();
        continue;
      }
      const repoCommit = response.headers.get(HEADER_REPO_COMMIT);
      if (repoCommit !== null && repoCommit !== commit) {
        await discardBody(response);
        throw new HubAnswerError(`${from} answered ${what} from commit ${repoCommit}`);
      }
      if (response.status === 206 || response.status === 200) {
        return this.#body(response, file, start, end, new URL(url).origin, from, what);
      }
      await discardBody(response);
      throw this.#refusal(response, repo, commit, file, from, what);
    }
    throw new HubAnswerError(`hub ${endpoint} redirected ${what} more than ${MAX_REDIRECTS} times`);
  }

  #body(
    response: Response,
    file: RepoFile,
    start: number,
    end: number,
    origin: string,
    from: string,
    what: string,
  ): ReadableStream<Uint8Array> {
    const body = response.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    let skip = 0;
    if (response.status === 206) {
      const range = parseContentRange(response.headers.get("Content-Range"));
      if (
        range === null || range.first !== start || range.last !== end - 1 ||
        (range.total !== null && range.total !== file.size)
      ) {
        body.cancel().catch(() => {});
        const got = response.headers.get("Content-Range") ?? "no Content-Range";
        throw new HubAnswerError(
          `${from} answered ${what} with ${got} (file of ${file.size} bytes)`,
        );
      }
    } else {
      // A 200 is the whole file: the server ignored Range (huggingface_hub restarts from 0 then).
      const length = response.headers.get("Content-Length");
      if (length !== null && Number(length) !== file.size) {
        body.cancel().catch(() => {});
        throw new HubAnswerError(
          `${from} answered ${what} with ${length} bytes, not the listed ${file.size}`,
        );
      }
      skip = start;
    }
    return byteSlice(
      body,
      skip,
      end - start,
      (got) =>
        new HubUnreachableError(
          origin,
          `transfer of ${what} ended after ${got} of ${end - start} bytes`,
        ),
      (e) => new HubUnreachableError(origin, `transfer of ${what} broke: ${unreachableReason(e)}`),
    );
  }

  #refusal(
    response: Response,
    repo: string,
    commit: string,
    file: RepoFile,
    from: string,
    what: string,
  ): HubError {
    if (response.status === 416) {
      return new HubAnswerError(`${from} has fewer bytes than listed for ${what} (416)`);
    }
    if (from.startsWith("CDN")) {
      // An expired or refused signed URL: asking the hub again gets a fresh one.
      return new HubAnswerError(`${from} answered ${response.status} for ${what}`, true);
    }
    return errorFromAnswer(response, {
      endpoint: this.#transport.config.endpoint,
      repo,
      revision: commit,
      file: file.path,
      hadToken: this.#transport.config.token !== undefined,
    });
  }
}
