/**
 * The agent API: register with a join token, then heartbeat and long-poll
 * the desired state with the node credential.
 *
 * @module
 */
import {
  CertificateAnswerSchema,
  CertificateRequestSchema,
  DesiredStateSchema,
  HeartbeatRequestSchema,
  HeartbeatResponseSchema,
  RegisterAnswerSchema,
  type RegisterRequest,
  RegisterRequestSchema,
} from "../../protocol/agent_protocol.ts";
import { CsrError } from "../../tls/csr.ts";
import type { ClusterTls } from "../cluster_tls.ts";
import { InvalidInputError, NotFoundError } from "../errors.ts";
import type { ControlPlane } from "../control_plane.ts";
import { ApiError } from "../api_error.ts";
import { RouteGroup } from "./route.ts";
import { DesiredQuery } from "../../protocol/admin_protocol.ts";
import { nodeOfRequest } from "./auth.ts";
import { bearer } from "../../http/tokens.ts";

/** The hosts a node's certificate names: what it registered, never what its CSR asks. */
function nodeHosts(reg: RegisterRequest): string[] {
  const hostOf = (url: string | null | undefined) => {
    if (url === null || url === undefined) return [];
    try {
      return [new URL(url).hostname];
    } catch {
      return [];
    }
  };
  return [reg.hostname, reg.mgmt_addr, ...hostOf(reg.agent_url), ...hostOf(reg.proxy_url)];
}

async function signNode(
  tls: ClusterTls,
  nodeId: string,
  csr: string,
  reg: RegisterRequest,
  now: number,
): Promise<string> {
  try {
    return await tls.signNode(nodeId, csr, nodeHosts(reg), now);
  } catch (e) {
    if (e instanceof CsrError) {
      throw new InvalidInputError("Cannot sign", [{ path: ["csr"], message: e.message }]);
    }
    throw e;
  }
}

/** The agent routes. */
export function agentRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/agent");
  g.add({
    method: "post",
    path: "/register",
    operationId: "registerNode",
    summary: "Register a node",
    tag: "agent",
    auth: "join",
    body: { schema: RegisterRequestSchema },
    response: RegisterAnswerSchema,
    answers: { 403: "The node id is taken (node_taken): re-registering needs its credential" },
  }, async ({ body, c }) => {
    // The CSR is checked before anything is written: a bad one changes nothing.
    const certificate = cp.tls !== null && body.csr !== undefined
      ? await signNode(cp.tls, body.node_id, body.csr, body, cp.state.now())
      : undefined;
    const answer = await cp.nodes.register(body, c.req.header("x-llmgw-node-token") ?? null);
    if (certificate !== undefined) cp.nodeCertificates.issued(answer.node_id, certificate);
    return certificate === undefined
      ? answer
      : { ...answer, certificate, ca_certificate: cp.tls!.ca.certPem };
  });
  g.add({
    method: "post",
    path: "/certificate",
    operationId: "renewNodeCertificate",
    summary: "Sign a new certificate for the calling node",
    tag: "agent",
    auth: "node",
    body: { schema: CertificateRequestSchema },
    response: CertificateAnswerSchema,
    answers: { 404: "The control plane runs without TLS (no_tls)" },
  }, async ({ body, c }) => {
    const nodeId = await nodeOfRequest(cp, c.req.header("authorization"));
    if (cp.tls === null) throw new NotFoundError("this control plane runs without TLS", "no_tls");
    const reg = cp.state.nodes.get(nodeId)!.registration;
    const certificate = await signNode(cp.tls, nodeId, body.csr, reg, cp.state.now());
    cp.nodeCertificates.issued(nodeId, certificate);
    await cp.state.event("certificate_issued", `node/${nodeId}`, "serving certificate renewed");
    return { certificate, ca_certificate: cp.tls.ca.certPem };
  });
  g.add({
    method: "post",
    path: "/heartbeat",
    operationId: "heartbeat",
    summary: "Record heartbeat",
    tag: "agent",
    auth: "node",
    body: { schema: HeartbeatRequestSchema },
    response: HeartbeatResponseSchema,
    answers: { 404: "The node is not registered (unknown_node): register again" },
  }, async ({ body, c }) => {
    await requireOwnNode(cp, c.req.header("authorization"), body.node_id);
    const answer = await cp.nodes.heartbeat(body);
    await cp.nodeCertificates.check(body.node_id);
    return { ...answer, metrics_token_hashes: cp.tokens.metricsHashes() };
  });
  g.add({
    method: "get",
    path: "/desired",
    operationId: "desiredState",
    summary: "Read desired state",
    tag: "agent",
    auth: "node",
    query: DesiredQuery,
    response: DesiredStateSchema,
    answers: { 404: "The node is not registered (unknown_node): register again" },
  }, async ({ query, c }) => {
    // The node credential says which node asks.
    const asker = await nodeOfRequest(cp, c.req.header("authorization"));
    const nodeId = query.node_id ?? asker;
    await requireOwnNode(cp, c.req.header("authorization"), nodeId);
    return cp.desired.wait(nodeId, query.generation, query.wait_ms, c.req.raw.signal);
  });
  return g;
}

/** Refuses a node credential that is not `nodeId`'s. */
async function requireOwnNode(
  cp: ControlPlane,
  header: string | undefined,
  nodeId: string,
): Promise<void> {
  const token = bearer(header);
  if (token === null || !(await cp.nodes.authenticate(nodeId, token))) {
    throw new ApiError(403, "forbidden", `this token is not node ${nodeId}'s credential`);
  }
}
