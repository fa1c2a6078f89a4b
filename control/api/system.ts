/**
 * Liveness, metrics and the API's own description.
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import { type HttpStats, renderMetrics } from "../metrics.ts";
import { RouteGroup } from "./route.ts";
import { LeadershipAnswer } from "../../protocol/leadership.ts";
import { NotFoundError } from "../errors.ts";
import {
  CaAnswer,
  HealthAnswer,
  MetricsAnswer,
  OpenApiAnswer,
} from "../../protocol/admin_protocol.ts";

/** The system routes; `document` builds the OpenAPI document on demand. */
export function systemRoutes(
  cp: ControlPlane,
  stats: HttpStats,
  document: () => Record<string, unknown>,
): RouteGroup {
  const g = new RouteGroup("");
  g.add({
    method: "get",
    path: "/healthz",
    operationId: "healthz",
    summary: "Liveness of the control plane",
    tag: "system",
    auth: "open",
    response: HealthAnswer,
  }, () => ({ status: "ok" }));
  g.add({
    method: "get",
    path: "/v1/leader",
    operationId: "leadership",
    summary: "This control plane's role and who leads (no secret: for clients and load balancers)",
    tag: "system",
    auth: "open",
    response: LeadershipAnswer,
  }, () => cp.leadership());
  g.add({
    method: "get",
    path: "/v1/ca",
    operationId: "clusterCa",
    summary: "The cluster CA certificate (public; check its key hash against the join token)",
    tag: "system",
    auth: "open",
    response: CaAnswer,
    answers: { 404: "The control plane runs without TLS (no_tls)" },
  }, () => {
    if (cp.tls === null) throw new NotFoundError("this control plane runs without TLS", "no_tls");
    return { ca_certificate: cp.tls.ca.certPem };
  });
  g.add({
    method: "get",
    path: "/metrics",
    operationId: "metrics",
    summary: "Prometheus metrics",
    tag: "system",
    auth: "metrics",
    response: MetricsAnswer,
    contentType: "text/plain",
  }, () => renderMetrics(cp, stats));
  g.add({
    method: "get",
    path: "/openapi.json",
    operationId: "openapi",
    summary: "This document",
    tag: "system",
    auth: "admin",
    response: OpenApiAnswer,
  }, () => document());
  return g;
}
