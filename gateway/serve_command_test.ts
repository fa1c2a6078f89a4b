/** `llmgw gateway serve` flag checks and its first answers (plan §12). */
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { UsageError } from "../cli/usage_error.ts";
import { EndpointTable } from "./endpoints.ts";
import { gatewayServeCommand, startGateway } from "./serve_command.ts";

Deno.test("gateway serve checks its flags", async () => {
  const prev = Deno.env.get("LLMGW_TOKEN");
  Deno.env.set("LLMGW_TOKEN", "t");
  try {
    const sink = () => {};
    await assertRejects(
      () => gatewayServeCommand(["--control", "http://c:1", "--listen", "0.0.0.0:x"], sink, sink),
      UsageError,
    );
    await assertRejects(
      () => gatewayServeCommand(["--control", "ftp://c"], sink, sink),
      UsageError,
      "http(s) URL",
    );
    let out = "";
    assertEquals(await gatewayServeCommand(["--help"], (t) => out += t, sink), 0);
    assertOk(out.includes("--allow-open"));
  } finally {
    if (prev === undefined) Deno.env.delete("LLMGW_TOKEN");
    else Deno.env.set("LLMGW_TOKEN", prev);
  }
});

Deno.test("before the first sync every model answers 503 with Retry-After", async () => {
  const gw = startGateway(new EndpointTable(), { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      body: '{"model":"any"}',
    });
    assertEquals(r.status, 503);
    assertEquals(r.headers.get("retry-after"), "5");
    assertEquals((await r.json()).error.type, "server_error");
  } finally {
    await gw.close();
  }
});
