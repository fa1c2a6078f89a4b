/** `llmgw gateway serve` flag checks (design §12). */
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { gatewayServeCommand, openNotice } from "./gateway_serve.ts";
import { UsageError } from "./usage_error.ts";

/** An environment of `vars` only: the process's own is never set by a test. */
const envOf = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("gateway serve checks its flags", async () => {
  const env = envOf({ LLMGW_TOKEN: "t" });
  const sink = () => {};
  await assertRejects(
    () =>
      gatewayServeCommand(["--control", "http://c:1", "--listen", "0.0.0.0:x"], sink, sink, env),
    UsageError,
  );
  await assertRejects(
    () => gatewayServeCommand(["--control", "ftp://c"], sink, sink, env),
    UsageError,
    "http(s) URL",
  );
  await assertRejects(
    () => gatewayServeCommand(["--control", "http://c:1", "--poll-interval", "0"], sink, sink, env),
    UsageError,
    "--poll-interval must be a positive number of seconds",
  );
  await assertRejects(
    () => gatewayServeCommand([], sink, sink, envOf({ LLMGW_TOKEN: "t", LLMGW_URL: "ftp://c" })),
    UsageError,
    "http(s) URL",
  );
  let out = "";
  assertEquals(await gatewayServeCommand(["--help"], (t) => out += t, sink, env), 0);
  assertOk(out.includes("--allow-open"));
});

Deno.test("gateway serve needs the admin token from the environment", async () => {
  await assertRejects(
    () => gatewayServeCommand(["--control", "http://c:1"], () => {}, () => {}, envOf({})),
    UsageError,
    "env LLMGW_TOKEN",
  );
});

Deno.test("the start notice says whether the gateway is open to the network", () => {
  assertOk(openNotice(true).includes("OPEN (--allow-open)"));
  assertOk(openNotice(false).includes("only loopback clients are served"));
});
