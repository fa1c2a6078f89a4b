/**
 * The gateway's probes for load balancers (design §12), open to anyone:
 * `/healthz` says the process serves; `/readyz` says it can route, once it
 * has synced its endpoint table from the control plane and some model has a
 * ready replica.
 *
 * @module
 */

/** What readiness is judged from (the endpoint table's view). */
export interface ReadinessView {
  /** Whether the table was synced from the control plane at least once. */
  readonly loaded: boolean;
  /** Models with at least one ready endpoint. */
  readyModels(): readonly string[];
}

/** A probe's answer. */
export interface ProbeAnswer {
  /** `ok`/`ready`, or `not_ready`. */
  status: "ok" | "ready" | "not_ready";
  /** Why it is not ready. */
  reason?: string;
}

/** Whether the gateway can route requests, and if not, why. */
export function readiness(view: ReadinessView): ProbeAnswer {
  if (!view.loaded) {
    return {
      status: "not_ready",
      reason: "the gateway has not synced its endpoints from the control plane yet",
    };
  }
  if (view.readyModels().length === 0) {
    return { status: "not_ready", reason: "no model has a ready replica" };
  }
  return { status: "ready" };
}

const HEADERS = { "cache-control": "no-store" };

/** `GET /healthz`: 200 while the process serves. */
export function healthzResponse(): Response {
  return Response.json({ status: "ok" } satisfies ProbeAnswer, { headers: HEADERS });
}

/** `GET /readyz`: 200 when {@link readiness} says ready, else 503 with the reason. */
export function readyzResponse(view: ReadinessView): Response {
  const answer = readiness(view);
  return Response.json(answer, {
    status: answer.status === "ready" ? 200 : 503,
    headers: HEADERS,
  });
}
