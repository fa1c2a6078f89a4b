import { assertOk, assertStringIncludes } from "../tests/assert.ts";
import { EndpointTable } from "./endpoints.ts";
import { createGateway } from "./app.ts";

Deno.test("the gateway counts requests by outcome, times first tokens and tracks in-flight requests", async () => {
  // A stub engine that streams three SSE chunks.
  const upstream = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    const enc = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        for (const t of ["a", "b", "c"]) {
          controller.enqueue(enc.encode(`data: {"t":"${t}"}\n\n`));
          await new Promise((r) => setTimeout(r, 5));
        }
        controller.enqueue(enc.encode("data: [DONE]\n\n"));
        controller.close();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  let gw: ReturnType<typeof createGateway> | undefined;
  try {
    const table = new EndpointTable();
    const addr = upstream.addr as Deno.NetAddr;
    table.setEndpoints([{ model: "m", replica_id: "m-r0", url: `http://127.0.0.1:${addr.port}` }], [
      "m",
      "idle",
    ]);
    gw = createGateway(table);
    const handler = gw;
    const post = (model: string) =>
      handler.fetch(
        new Request("http://gw/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, stream: true, messages: [] }),
        }),
      );
    const ok = await post("m");
    assertStringIncludes(await ok.text(), "[DONE]");
    await (await post("nope")).body?.cancel();
    await (await post("idle")).body?.cancel();
    const text = await (await handler.fetch(new Request("http://gw/metrics"))).text();
    assertStringIncludes(text, 'llmgw_gateway_requests_total{model="m",outcome="ok"} 1');
    assertStringIncludes(
      text,
      'llmgw_gateway_requests_total{model="",outcome="model_not_found"} 1',
    );
    assertOk(!text.includes("nope"), "a made-up model name never becomes a label");
    assertStringIncludes(
      text,
      'llmgw_gateway_requests_total{model="idle",outcome="no_ready_replica"} 1',
    );
    assertStringIncludes(text, 'llmgw_gateway_time_to_first_token_seconds_count{model="m"} 1');
    assertStringIncludes(
      text,
      'llmgw_gateway_replica_time_to_first_token_seconds_count{model="m",replica="m-r0"} 1',
    );
    assertStringIncludes(text, 'llmgw_gateway_inflight_requests{model="m",replica="m-r0"} 0');
    assertOk(/llmgw_gateway_request_duration_seconds_count\{model="m"\} 1/.test(text));
  } finally {
    gw?.close();
    await upstream.shutdown();
  }
});
