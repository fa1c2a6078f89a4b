/**
 * Who may call what (design §11.2): each route declares a token kind
 * (route.ts), and this checks the caller's bearer token against it before
 * the request is read. {@link ACCEPTS} is the one table of which tokens each
 * kind of route takes. No token, or one that is unknown, expired or revoked,
 * is 401; a valid token of another kind is 403.
 *
 * @module
 */
import type { Context } from "hono";
import type { AccessTokenKind } from "../access_tokens.ts";
import { ApiError } from "../api_error.ts";
import type { ControlPlane } from "../control_plane.ts";
import { bearer, digestMatchesAny, hashToken } from "../../http/tokens.ts";
import type { Authorizer, TokenKind } from "./route.ts";

/** Operator-set tokens from the environment, given hashed, and the CA join tokens name. */
export interface ApiAuth {
  /** The CA's public-key hash (hex) that new join tokens carry; absent without TLS. */
  caHash?: string | null;
  /** SHA-256 hashes of join tokens (agents registering). */
  joinTokenHashes: readonly string[];
  /** SHA-256 hashes of admin tokens. */
  adminTokenHashes: readonly string[];
  /** SHA-256 hashes of gateway tokens held in memory (the embedded gateway's). */
  gatewayTokenHashes?: readonly string[];
}

/**
 * The token kinds each kind of route accepts. An admin may also read what a
 * gateway or Prometheus reads (an operator debugging with curl); no other
 * kind reaches past its own routes, and node credentials are per node.
 */
export const ACCEPTS: Readonly<Record<Exclude<TokenKind, "open" | "node">, AccessTokenKind[]>> = {
  admin: ["admin"],
  gateway: ["gateway", "admin"],
  metrics: ["metrics", "admin"],
  join: ["join"],
};

/** What a 401 says each kind needs. */
const NEEDED: Record<Exclude<TokenKind, "open">, string> = {
  admin: "an admin token is required (Authorization: Bearer …)",
  gateway: "a gateway or admin token is required",
  metrics: "a metrics or admin token is required",
  join: "a join token is required",
  node: "a node credential is required",
};

/** The node a request's node credential belongs to; 401 without one, 403 for another kind. */
export async function nodeOfRequest(cp: ControlPlane, header: string | undefined): Promise<string> {
  const token = bearer(header);
  if (token === null) throw new ApiError(401, "unauthorized", NEEDED.node);
  const found = await cp.nodes.nodeForToken(token);
  if (found !== null) return found;
  throw new ApiError(403, "forbidden", "this token is no node's credential");
}

/** The kind of an operator-set token from its digest, or null. */
function staticKind(auth: ApiAuth, digest: string): AccessTokenKind | null {
  if (digestMatchesAny(digest, auth.adminTokenHashes)) return "admin";
  if (digestMatchesAny(digest, auth.joinTokenHashes)) return "join";
  if (digestMatchesAny(digest, auth.gatewayTokenHashes ?? [])) return "gateway";
  return null;
}

/**
 * The authorizer of a control plane's routes: a token the control plane does
 * not know (none of its access tokens or node credentials, or one expired or
 * revoked) is 401; one it knows, of a kind the route does not take, 403.
 */
export function authorizer(cp: ControlPlane, auth: ApiAuth): Authorizer {
  return async (kind: TokenKind, c: Context) => {
    if (kind === "open") return;
    const token = bearer(c.req.header("authorization"));
    if (token === null) throw new ApiError(401, "unauthorized", NEEDED[kind]);
    // Hashed once: heartbeats and long polls come through here at fleet rate.
    const digest = await hashToken(token);
    const node = cp.nodes.nodeForDigest(digest) !== null;
    if (kind === "node" && node) return;
    const held = await cp.tokens.kindOf(token) ?? staticKind(auth, digest) ??
      (node ? "node" : null);
    if (held === null) {
      throw new ApiError(
        401,
        "unauthorized",
        `this token is unknown, expired or revoked; ${NEEDED[kind]}`,
      );
    }
    const ok = kind === "node" ? held === "node" : held !== "node" && ACCEPTS[kind].includes(held);
    if (!ok) {
      throw new ApiError(
        403,
        "forbidden",
        `a ${held} token may not call this route; ${NEEDED[kind]}`,
      );
    }
  };
}
