/**
 * What gateways follow, with a gateway token: the ready endpoints, the API
 * keys' hashes and every served model name (protocol/gateway_protocol.ts).
 *
 * @module
 */
import {
  type EndpointListAnswer,
  EndpointListAnswerSchema,
} from "../../protocol/gateway_protocol.ts";
import type { ControlPlane } from "../control_plane.ts";
import { NotSettledError } from "../errors.ts";
import { RouteGroup } from "./route.ts";

/** The gateway routes. */
export function gatewayRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/endpoints");
  g.add({
    method: "get",
    path: "/",
    operationId: "listEndpoints",
    summary: "List ready endpoints and API key hashes for gateways",
    tag: "gateway",
    auth: "gateway",
    response: EndpointListAnswerSchema,
    answers: {
      503:
        "Restarted and waiting for the agents' first reports (settling): keep the last known set",
    },
  }, (): EndpointListAnswer => {
    // Gateways keep their last known set on an error (gateway/follow.ts).
    if (!cp.endpointsSettled()) {
      throw new NotSettledError(
        "the control plane restarted and waits for the agents' first reports; " +
          "keep the last known endpoints",
      );
    }
    return {
      endpoints: cp.readyEndpoints(),
      api_keys: cp.apiKeys.hashes(),
      models: cp.deployments.servedNames(),
      routing: cp.deployments.routing(),
    };
  });
  return g;
}
