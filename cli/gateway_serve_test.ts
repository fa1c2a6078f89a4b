/** `llmgw gateway serve` flag checks (design §12). */
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { gatewayServeCommand, openNotice } from "./gateway_serve.ts";
import { UsageError } from "./usage_error.ts";

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
    await assertRejects(
      () => gatewayServeCommand(["--control", "http://c:1", "--poll-interval", "0"], sink, sink),
      UsageError,
      "--poll-interval must be a positive number of seconds",
    );
    let out = "";
    assertEquals(await gatewayServeCommand(["--help"], (t) => out += t, sink), 0);
    assertOk(out.includes("--allow-open"));
  } finally {
    if (prev === undefined) Deno.env.delete("LLMGW_TOKEN");
    else Deno.env.set("LLMGW_TOKEN", prev);
  }
});

Deno.test("gateway serve needs the admin token from the environment", async () => {
  const prev = Deno.env.get("LLMGW_TOKEN");
  Deno.env.delete("LLMGW_TOKEN");
  try {
    await assertRejects(
      () => gatewayServeCommand(["--control", "http://c:1"], () => {}, () => {}),
      UsageError,
      "env LLMGW_TOKEN",
    );
  } finally {
    if (prev !== undefined) Deno.env.set("LLMGW_TOKEN", prev);
  }
});

Deno.test("the start notice says whether the gateway is open to the network", () => {
  assertOk(openNotice(true).includes("OPEN (--allow-open)"));
  assertOk(openNotice(false).includes("only loopback clients are served"));
});
