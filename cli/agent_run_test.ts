/**
 * `llmgw agent run`'s command line: flags and environment to agent options,
 * and clear usage errors (exit code 2 through main).
 */
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import { fixturePath } from "../tests/fixtures.ts";
import type { AgentOptions } from "../agent/agent.ts";
import { DEFAULT_STATE_DIR, parseLabels, runOptions } from "./agent_run.ts";
import { main } from "./main.ts";
import { parseListen, UsageError } from "./usage_error.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("agent run: flags, environment and the config file make the options", async () => {
  const config = fixturePath("machines/l40s_pcie_vm/agent.json");
  const o = await runOptions(
    [
      "--control",
      "https://control.example:8443",
      "--node-id",
      "gpu-01",
      "--config",
      config,
      "--fabric",
      "ib-a=mlx5_1,mlx5_2",
      "--label",
      "zone=a",
      "--label",
      "rack=",
      "--mgmt-addr",
      "10.0.0.5",
      "--mgmt-interface",
      "eth1",
      "--listen",
      "[::1]:9999",
      "--engine-plugins",
      "/opt/plugins",
    ],
    env({ LLMGW_JOIN_TOKEN: "join-from-env", LLMGW_LOCAL_TOKEN: "local-from-env" }),
  ) as AgentOptions;
  assertEquals(o.controlUrl, "https://control.example:8443");
  assertEquals([o.joinToken, o.localToken], ["join-from-env", "local-from-env"]);
  assertEquals(o.nodeId, "gpu-01");
  assertEquals(o.stateDir, DEFAULT_STATE_DIR);
  assertEquals(o.discovery?.fabrics, { "roce-a": ["mlx5_0"], "ib-a": ["mlx5_1", "mlx5_2"] });
  assertEquals(o.discovery?.nvidiaSmi, fixturePath("machines/l40s_pcie_vm/nvidia-smi"));
  assertEquals(o.labels, { zone: "a", rack: "" });
  assertEquals([o.mgmtAddr, o.mgmtInterface], ["10.0.0.5", "eth1"]);
  assertEquals(o.listen, { hostname: "::1", port: 9999 });
  assertOk(o.pluginDirs?.[0] === "/opt/plugins");
  // A flag wins over the environment.
  const f = await runOptions(
    ["--control", "http://c", "--token", "join-flag", "--local-token", "local-flag"],
    env({ LLMGW_JOIN_TOKEN: "join-env", LLMGW_LOCAL_TOKEN: "local-env" }),
  ) as AgentOptions;
  assertEquals([f.joinToken, f.localToken], ["join-flag", "local-flag"]);
  assertEquals(
    (await runOptions(
      [],
      env({ LLMGW_CONTROL_URL: "http://c", LLMGW_JOIN_TOKEN: "j" }),
    ) as AgentOptions)
      .controlUrl,
    "http://c",
  );
  assertEquals(await runOptions(["--help"], env({})), "help");
});

Deno.test("agent run: mistakes are usage errors naming the flag", async () => {
  const cases: [string[], Record<string, string>, string][] = [
    [[], { LLMGW_JOIN_TOKEN: "j" }, "--control URL is required"],
    [["--control", "ftp://c"], { LLMGW_JOIN_TOKEN: "j" }, "not an http(s) URL"],
    [["--control", "http://c"], {}, "a join token is required"],
    [["--control", "http://c", "--token", "a b"], {}, "contains whitespace"],
    [["--control", "http://c", "--node-id", "no spaces"], { LLMGW_JOIN_TOKEN: "j" }, "--node-id"],
    [["--control", "http://c", "--listen", "9180"], { LLMGW_JOIN_TOKEN: "j" }, "HOST:PORT"],
    [["--control", "http://c", "--label", "novalue"], { LLMGW_JOIN_TOKEN: "j" }, "KEY=VALUE"],
    [
      ["--control", "http://c", "--fabric", "ib0"],
      { LLMGW_JOIN_TOKEN: "j" },
      "Cannot parse --fabric",
    ],
    [
      ["--control", "http://c", "--config", "/nonexistent.json"],
      { LLMGW_JOIN_TOKEN: "j" },
      "cannot read --config",
    ],
    [["--control", "http://c", "--bogus"], { LLMGW_JOIN_TOKEN: "j" }, "--bogus"],
    [["--control", "http://c", "extra"], { LLMGW_JOIN_TOKEN: "j" }, 'unexpected argument "extra"'],
  ];
  for (const [args, vars, message] of cases) {
    let caught: unknown;
    try {
      await runOptions(args, env(vars));
    } catch (e) {
      caught = e;
    }
    assertOk(caught instanceof UsageError, `${args.join(" ")}: ${caught}`);
    assertOk((caught as Error).message.includes(message), `${args.join(" ")}: ${caught}`);
  }
});

Deno.test("agent run: labels and listen addresses", () => {
  assertEquals(parseLabels(["a=1", "x.io/b=two=2"]), { a: "1", "x.io/b": "two=2" });
  assertThrows(() => parseLabels(["a=1", "a=2"]), UsageError, "given twice");
  assertThrows(() => parseLabels(["=1"]), UsageError, "KEY=VALUE");
  assertEquals(parseListen("0.0.0.0:9180"), { hostname: "0.0.0.0", port: 9180 });
  assertEquals(parseListen(":80"), { hostname: "0.0.0.0", port: 80 });
  assertEquals(parseListen("[::]:0"), { hostname: "::", port: 0 });
  assertThrows(() => parseListen("host:70000"), UsageError);
  assertThrows(() => parseListen("::1:80"), UsageError);
});

Deno.test("agent run: wired into the CLI, with usage errors exiting 2", async () => {
  let out = "";
  let err = "";
  const io = { out: (t: string) => (out += t), err: (t: string) => (err += t) };
  assertEquals(await main(["agent", "run", "--help"], io), 0);
  assertOk(out.includes("Usage: llmgw agent run"));
  assertEquals(await main(["help"], io), 0);
  assertOk(out.includes("agent run"));
  // A mistake found before the environment is read: tests never change the
  // process's environment, which parallel test files share (the join token's
  // absence is covered through runOptions' env above).
  assertEquals(await main(["agent", "run", "--control", "http://c", "extra"], io), 2);
  assertOk(err.includes('agent run: unexpected argument "extra"'), err);
});
