/**
 * A node registration for control-plane tests: the reviewed inventory of a
 * recorded machine, as an agent on loopback would send it.
 *
 * @module
 */
import type { Inventory } from "../discovery/types.ts";
import { AGENT_PROTOCOL_VERSION, type RegisterRequest } from "../protocol/agent_protocol.ts";
import { readFixture } from "./fixtures.ts";

/** The registration of node `nodeId` on recorded `machine`, with `extra` fields over it. */
export function registration(
  nodeId: string,
  machine = "rtx4090_8x_server",
  extra: Partial<RegisterRequest> = {},
): RegisterRequest {
  const inv = JSON.parse(
    readFixture(`machines/${machine}/expected_inventory.json`),
  ) as Inventory;
  return {
    protocol: AGENT_PROTOCOL_VERSION,
    node_id: nodeId,
    hostname: nodeId,
    mgmt_addr: "127.0.0.1",
    mgmt_interface: "lo",
    agent_url: null,
    labels: {},
    gpus: inv.gpus,
    fabrics: inv.fabrics,
    agent_version: "0.1.0",
    engine_versions: {},
    ...extra,
  };
}
