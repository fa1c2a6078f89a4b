/**
 * Who may call what: each route declares a token kind (route.ts), and this
 * checks the caller's bearer token against it before the request is read.
 * No token is 401; a token of another kind 403.
 *
 * @module
 */
import type { Context } from "hono";
import { ApiError } from "../api_error.ts";
import type { ControlPlane } from "../control_plane.ts";
import { bearer, tokenMatches } from "../tokens.ts";
import type { Authorizer, TokenKind } from "./route.ts";

/** Who may call what: tokens are given hashed. */
export interface ApiAuth {
  /** SHA-256 hashes of join tokens (agents registering). */
  joinTokenHashes: readonly string[];
  /** SHA-256 hashes of admin tokens. */
  adminTokenHashes: readonly string[];
}

async function matchesAny(token: string, hashes: readonly string[]): Promise<boolean> {
  let ok = false;
  for (const h of hashes) ok = (await tokenMatches(token, h)) || ok;
  return ok;
}

/** What a 401 says each kind needs. */
const NEEDED: Record<Exclude<TokenKind, "open">, string> = {
  admin: "an admin token is required (Authorization: Bearer …)",
  join: "a join token is required",
  node: "a node credential is required",
};

/** The node a request's node credential belongs to; 401 without one, 403 for another kind. */
export async function nodeOfRequest(cp: ControlPlane, header: string | undefined): Promise<string> {
  const token = bearer(header);
  if (token === null) throw new ApiError(401, "unauthorized", NEEDED.node);
  const found = await cp.nodes.nodeForToken(token);
  if (found === null) throw new ApiError(403, "forbidden", "this token is no node's credential");
  return found;
}

/** The authorizer of a control plane's routes. */
export function authorizer(cp: ControlPlane, auth: ApiAuth): Authorizer {
  return async (kind: TokenKind, c: Context) => {
    if (kind === "open") return;
    if (kind === "node") {
      await nodeOfRequest(cp, c.req.header("authorization"));
      return;
    }
    const token = bearer(c.req.header("authorization"));
    if (token === null) throw new ApiError(401, "unauthorized", NEEDED[kind]);
    const hashes = kind === "admin" ? auth.adminTokenHashes : auth.joinTokenHashes;
    if (!(await matchesAny(token, hashes))) {
      throw new ApiError(
        403,
        "forbidden",
        kind === "admin"
          ? "this token may not use the admin API"
          : "this token is not a join token",
      );
    }
  };
}
