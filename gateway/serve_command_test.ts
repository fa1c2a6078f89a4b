/** `llmgw gateway serve` flag checks (plan §12): refusing to be open to the network by accident. */
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { UsageError } from "../cli/usage_error.ts";
import { EndpointTable } from "./endpoints.ts";
import { gatewayServeCommand, isLoopback, startGateway } from "./serve_command.ts";

Deno.test("isLoopback", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) assertOk(isLoopback(h), h);
  for (const h of ["0.0.0.0", "10.0.0.1", "::", "gw.example"]) assertOk(!isLoopback(h), h);
});

Deno.test("gateway serve refuses a non-loopback address without --allow-open", async () => {
  const prev = Deno.env.get("LLMGW_TOKEN");
  Deno.env.set("LLMGW_TOKEN", "t");
  try {
    const sink = () => {};
    await assertRejects(
      () => gatewayServeCommand(["--control", "http://c:1", "--listen", "0.0.0.0:0"], sink, sink),
      UsageError,
      "--allow-open",
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
