/**
 * Access tokens (design §11.2): list (no secrets), create (the token shown
 * once), revoke. A join token created while the control plane serves TLS
 * carries the CA's public-key hash, so an agent can check the server before
 * it sends the token.
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import { RouteGroup } from "./route.ts";
import {
  NewTokenAnswer,
  RevokedTokenAnswer,
  TokenBody,
  TokenListSchema,
  TokenParams,
  TokensQuery,
} from "../../protocol/admin_protocol.ts";

/** The token routes; `caHash` is the CA's public-key hash when TLS is on. */
export function tokenRoutes(cp: ControlPlane, caHash: string | null): RouteGroup {
  const g = new RouteGroup("/v1/tokens");
  g.add({
    method: "get",
    path: "/",
    operationId: "listTokens",
    summary: "List access tokens (no secrets)",
    tag: "tokens",
    auth: "admin",
    query: TokensQuery,
    response: TokenListSchema,
  }, ({ query }) => ({ tokens: cp.tokens.list(query.kind) }));
  g.add({
    method: "post",
    path: "/",
    operationId: "createToken",
    summary: "Create an access token",
    tag: "tokens",
    auth: "admin",
    body: { schema: TokenBody },
    response: NewTokenAnswer,
    status: 201,
  }, async ({ body }) => {
    const created = await cp.tokens.create({
      kind: body.kind,
      description: body.description,
      ttl_ms: body.ttl_seconds === undefined
        ? undefined
        : body.ttl_seconds === null
        ? null
        : body.ttl_seconds * 1000,
    });
    return body.kind === "join" && caHash !== null
      ? { ...created, token: `${created.token}.${caHash}` }
      : created;
  });
  g.add({
    method: "delete",
    path: "/:id",
    operationId: "revokeToken",
    summary: "Revoke an access token",
    tag: "tokens",
    auth: "admin",
    params: TokenParams,
    response: RevokedTokenAnswer,
    answers: { 404: "No token with this id" },
  }, async ({ params }) => ({ revoked: await cp.tokens.revoke(params.id) }));
  return g;
}
