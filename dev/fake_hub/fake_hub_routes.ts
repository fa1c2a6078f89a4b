/**
 * The hub's own routes, answered as the real hub answers (docs/models.md,
 * "The hub's protocol, as llmgw speaks it"):
 *
 * - `GET /api/models/{org}/{name}[/revision/{rev}][?blobs=true]`: the commit
 *   and the file list (sizes, blob ids, LFS SHA-256 with `blobs=true`).
 * - `GET|HEAD /{org}/{name}/resolve/{rev}/{path}`: a small file's bytes
 *   (with `Range`, `ETag`, `X-Repo-Commit`), or for an LFS file a 302 to a
 *   short-lived signed CDN URL with `X-Linked-Etag` and `X-Linked-Size`.
 *
 * Refusals carry the hub's status and `X-Error-Code`: an unknown (or
 * hidden) repo is 401 without a token and 404 with one (RepoNotFound); a
 * gated repo is 401 without a token, 403 with one not granted (GatedRepo);
 * an unknown revision 404 RevisionNotFound; an unknown file 404
 * EntryNotFound; a token the hub does not know, 401 on every route.
 *
 * @module
 */
import {
  COMMIT_PATTERN,
  HEADER_LINKED_ETAG,
  HEADER_LINKED_SIZE,
  HEADER_REPO_COMMIT,
  INVALID_CREDENTIALS_MESSAGE,
} from "../../models/hub_protocol.ts";
import { type Asker, jsonAnswer, rangeAnswer, refusal, smallBody } from "./fake_hub_answers.ts";
import type { FakeHubState } from "./fake_hub_state.ts";
import type { FakeFile, FakeRepo } from "./fake_repo.ts";

/** The bearer token of `request`: undefined when none, null when the header is malformed. */
function bearer(request: Request): string | undefined | null {
  const header = request.headers.get("Authorization");
  if (header === null) return undefined;
  const m = header.match(/^Bearer (\S+)$/);
  return m ? m[1] : null;
}

/** The refusal for `token` reading repo `id`, or null when it may. */
function accessRefusal(
  state: FakeHubState,
  asker: Asker,
  id: string,
  repo: FakeRepo | undefined,
  token: string | undefined,
  head: boolean,
): Response | null {
  const granted = token !== undefined && repo?.grantedTokens.includes(token);
  if (repo === undefined || (repo.private && !granted)) {
    // Without a token the hub will not say whether the repo exists.
    return refusal(
      state,
      asker,
      token === undefined ? 401 : 404,
      "RepoNotFound",
      "Repository not found",
      head,
    );
  }
  if (repo.gated !== false && !granted) {
    return token === undefined
      ? refusal(
        state,
        asker,
        401,
        "GatedRepo",
        `Access to model ${id} is restricted. You must have access to it and be authenticated to access it. Please log in.`,
        head,
      )
      : refusal(
        state,
        asker,
        403,
        "GatedRepo",
        `Access to model ${id} is restricted and you are not in the authorized list. Visit ${state.hubOrigin}/${id} to ask for access.`,
        head,
      );
  }
  return null;
}

/** The commit `rev` names in `repo`: a branch or tag, or a full commit id. */
function commitOf(repo: FakeRepo, rev: string): string | undefined {
  if (Object.hasOwn(repo.refs, rev)) return repo.refs[rev];
  return COMMIT_PATTERN.test(rev) && Object.hasOwn(repo.commits, rev) ? rev : undefined;
}

function sibling(file: FakeFile, blobs: boolean): Record<string, unknown> {
  if (!blobs) return { rfilename: file.path };
  const out: Record<string, unknown> = {
    rfilename: file.path,
    size: file.size,
    blobId: file.blobId,
  };
  if (file.sha256 !== undefined) {
    out.lfs = { sha256: file.sha256, size: file.size, pointerSize: file.pointerSize };
  }
  return out;
}

/** Answers one request to the hub's own listener. */
export function handleHub(state: FakeHubState, request: Request): Response {
  const url = new URL(request.url);
  const parts = url.pathname.split("/").slice(1).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return "\0";
    }
  });
  const isApi = parts[0] === "api" && parts[1] === "models";
  const asker: Asker = {
    kind: isApi ? "api" : "resolve",
    caller: request.headers.get("User-Agent") ?? "-",
  };
  const head = request.method === "HEAD";
  const token = bearer(request);
  state.counters.request(asker.kind, asker.caller, token !== undefined);
  if (request.method !== "GET" && !head) {
    return jsonAnswer(state, asker, 405, { error: "Method not allowed" });
  }
  if (token === null || (token !== undefined && !state.tokens.has(token))) {
    return refusal(state, asker, 401, null, INVALID_CREDENTIALS_MESSAGE, head);
  }
  if (isApi && (parts.length === 4 || (parts.length === 6 && parts[4] === "revision"))) {
    const id = `${parts[2]}/${parts[3]}`;
    const rev = parts.length === 6 ? parts[5] : "main";
    return revisionAnswer(
      state,
      asker,
      id,
      rev,
      token,
      url.searchParams.get("blobs") === "true",
      head,
    );
  }
  if (!isApi && parts.length >= 5 && parts[2] === "resolve") {
    return resolveAnswer(
      state,
      asker,
      request,
      `${parts[0]}/${parts[1]}`,
      parts[3],
      parts.slice(4).join("/"),
      token,
    );
  }
  return jsonAnswer(
    state,
    asker,
    404,
    { error: "Sorry, we can't find the page you are looking for." },
    {},
    head,
  );
}

function revisionAnswer(
  state: FakeHubState,
  asker: Asker,
  id: string,
  rev: string,
  token: string | undefined,
  blobs: boolean,
  head: boolean,
): Response {
  const repo = state.repos.get(id);
  const refused = accessRefusal(state, asker, id, repo, token, head);
  if (refused !== null) return refused;
  const commit = commitOf(repo!, rev);
  if (commit === undefined) {
    return refusal(state, asker, 404, "RevisionNotFound", `Invalid rev id: ${rev}`, head);
  }
  const [org] = id.split("/");
  return jsonAnswer(
    state,
    asker,
    200,
    {
      _id: commit.slice(0, 24),
      id,
      modelId: id,
      author: org,
      sha: commit,
      private: repo!.private,
      gated: repo!.gated,
      disabled: false,
      tags: [],
      siblings: repo!.commits[commit].map((f) => sibling(f, blobs)),
    },
    {},
    head,
  );
}

function resolveAnswer(
  state: FakeHubState,
  asker: Asker,
  request: Request,
  id: string,
  rev: string,
  path: string,
  token: string | undefined,
): Response {
  const head = request.method === "HEAD";
  const repo = state.repos.get(id);
  const refused = accessRefusal(state, asker, id, repo, token, head);
  if (refused !== null) return refused;
  const commit = commitOf(repo!, rev);
  if (commit === undefined) {
    return refusal(state, asker, 404, "RevisionNotFound", `Invalid rev id: ${rev}`, head);
  }
  const file = repo!.commits[commit].find((f) => f.path === path);
  if (file === undefined) {
    return refusal(state, asker, 404, "EntryNotFound", "Entry not found", head, {
      [HEADER_REPO_COMMIT]: commit,
    });
  }
  if (file.sha256 === undefined) {
    return rangeAnswer(state, asker, request, file.size, file.read, {
      ETag: `"${file.blobId}"`,
      [HEADER_REPO_COMMIT]: commit,
      "Content-Type": "text/plain; charset=utf-8",
    });
  }
  const location = `${state.cdnOrigin}${state.signer.sign(file.sha256, path.split("/").pop()!)}`;
  const text = `Found. Redirecting to ${location}`;
  return new Response(head ? null : smallBody(state, asker, text), {
    status: 302,
    headers: {
      Location: location,
      ETag: `"${file.blobId}"`,
      [HEADER_LINKED_ETAG]: `"${file.sha256}"`,
      [HEADER_LINKED_SIZE]: String(file.size),
      [HEADER_REPO_COMMIT]: commit,
      "Content-Type": "text/plain; charset=utf-8",
      "Content-Length": String(new TextEncoder().encode(text).byteLength),
    },
  });
}
