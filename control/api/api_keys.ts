/**
 * Gateway API keys: list (no secrets), create (the key shown once), delete.
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import { RouteGroup } from "./route.ts";
import {
  ApiKeyBody,
  ApiKeyListSchema,
  ApiKeyParams,
  DeletedAnswer,
  NewApiKeyAnswer,
} from "../../protocol/admin_protocol.ts";

/** The API key routes. */
export function apiKeyRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/apikeys");
  g.add({
    method: "get",
    path: "/",
    operationId: "listApiKeys",
    summary: "List gateway API keys (no secrets)",
    tag: "apikeys",
    auth: "admin",
    response: ApiKeyListSchema,
  }, () => ({ api_keys: cp.apiKeys.list() }));
  g.add({
    method: "post",
    path: "/",
    operationId: "createApiKey",
    summary: "Create API key",
    tag: "apikeys",
    auth: "admin",
    body: { schema: ApiKeyBody },
    response: NewApiKeyAnswer,
    status: 201,
  }, ({ body }) => cp.apiKeys.create(body.name, body.models ?? null));
  g.add({
    method: "delete",
    path: "/:id",
    operationId: "deleteApiKey",
    summary: "Delete API key",
    tag: "apikeys",
    auth: "admin",
    params: ApiKeyParams,
    response: DeletedAnswer,
  }, async ({ params }) => {
    await cp.apiKeys.delete(params.id);
    return { deleted: params.id };
  });
  return g;
}
