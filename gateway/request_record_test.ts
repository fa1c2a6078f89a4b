import { assertEquals } from "../tests/assert.ts";
import { GatewayMetrics } from "./metrics.ts";
import { outcomeOf, RequestRecord } from "./request_record.ts";

/** A record on a clock the test moves, and the metric lines it produced. */
function recorded() {
  const metrics = new GatewayMetrics();
  let t = 1_000;
  const record = new RequestRecord(metrics, () => t);
  const released: string[] = [];
  return {
    record,
    released,
    advance: (ms: number) => void (t += ms),
    release: (name: string) => () => void released.push(name),
    lines: (prefix: string) =>
      metrics.render().split("\n").filter((l) => l.startsWith(prefix) && !l.startsWith("# ")),
  };
}

Deno.test("outcomeOf: the outcome each status stands for", () => {
  const cases: [number, string][] = [
    [200, "ok"],
    [204, "ok"],
    [400, "bad_request"],
    [401, "unauthorized"],
    [403, "unauthorized"],
    [404, "model_not_found"],
    [413, "bad_request"],
    [499, "client_closed"],
    [500, "upstream_error"],
    [502, "upstream_unreachable"],
    [503, "no_ready_replica"],
  ];
  for (const [status, want] of cases) assertEquals(outcomeOf(status), want, String(status));
});

Deno.test("a retried request: each attempt released and counted once, the request once", () => {
  const r = recorded();
  r.record.routed("m", "k1");
  r.record.attempt("r1", r.release("r1"));
  r.advance(20);
  r.record.attemptEnded("upstream_unreachable");
  r.record.attemptEnded("upstream_unreachable"); // nothing open: nothing counted
  r.record.attempt("r2", r.release("r2"));
  r.advance(80);
  r.record.firstByte();
  r.record.finish("ok", { prompt: 7, completion: 3 });
  r.record.finish("upstream_error", { prompt: 100, completion: 100 }); // counted already
  r.record.settle(new Response(null, { status: 500 }));
  assertEquals(r.released, ["r1", "r2"]);
  assertEquals(r.lines("llmgw_gateway_requests_total"), [
    'llmgw_gateway_requests_total{model="m",outcome="ok"} 1',
  ]);
  assertEquals(r.lines("llmgw_gateway_replica_requests_total"), [
    'llmgw_gateway_replica_requests_total{model="m",replica="r1",outcome="upstream_unreachable"} 1',
    'llmgw_gateway_replica_requests_total{model="m",replica="r2",outcome="ok"} 1',
  ]);
  assertEquals(r.lines("llmgw_gateway_inflight_requests"), [
    'llmgw_gateway_inflight_requests{model="m",replica="r1"} 0',
    'llmgw_gateway_inflight_requests{model="m",replica="r2"} 0',
  ]);
  assertEquals(r.lines("llmgw_gateway_tokens_total"), [
    'llmgw_gateway_tokens_total{model="m",api_key="k1",kind="prompt"} 7',
    'llmgw_gateway_tokens_total{model="m",api_key="k1",kind="completion"} 3',
  ]);
  // Times on the injected clock: 0.1 s to the first byte and to the end; the attempt 0.08 s.
  assertEquals(r.lines("llmgw_gateway_time_to_first_token_seconds_sum"), [
    'llmgw_gateway_time_to_first_token_seconds_sum{model="m"} 0.1',
  ]);
  assertEquals(r.lines("llmgw_gateway_replica_request_duration_seconds_sum"), [
    'llmgw_gateway_replica_request_duration_seconds_sum{model="m",replica="r1"} 0.02',
    'llmgw_gateway_replica_request_duration_seconds_sum{model="m",replica="r2"} 0.08',
  ]);
});

Deno.test("settle counts a refusal by its status, but not an answer whose body counts itself", () => {
  const refused = recorded();
  refused.record.settle(new Response(null, { status: 401 }));
  assertEquals(refused.lines("llmgw_gateway_requests_total"), [
    'llmgw_gateway_requests_total{model="",outcome="unauthorized"} 1',
  ]);

  const relayed = recorded();
  relayed.record.routed("m", "none");
  relayed.record.attempt("r1", relayed.release("r1"));
  relayed.record.defer();
  relayed.record.settle(new Response("streaming"));
  assertEquals(relayed.lines("llmgw_gateway_requests_total"), []);
  assertEquals(relayed.released, [], "still in flight while its body is relayed");
  relayed.record.finish("client_closed");
  assertEquals(relayed.released, ["r1"]);
  assertEquals(relayed.lines("llmgw_gateway_requests_total"), [
    'llmgw_gateway_requests_total{model="m",outcome="client_closed"} 1',
  ]);
});

Deno.test("a request never routed counts under no model, and its tokens nowhere", () => {
  const r = recorded();
  r.record.finish("bad_request", { prompt: 5, completion: 5 });
  assertEquals(r.lines("llmgw_gateway_tokens_total"), []);
  assertEquals(r.lines("llmgw_gateway_requests_total"), [
    'llmgw_gateway_requests_total{model="",outcome="bad_request"} 1',
  ]);
});
