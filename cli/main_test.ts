import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { COMMAND_PATHS, main } from "./main.ts";

async function run(args: string[]) {
  let out = "";
  let err = "";
  const code = await main(args, { out: (t) => out += t, err: (t) => err += t });
  return { code, out, err };
}

Deno.test("main prints usage and version", async () => {
  for (const args of [[], ["help"], ["--help"]]) {
    const r = await run(args);
    assertEquals(r.code, 0);
    assertStringIncludes(r.out, "agent inventory");
  }
  assertEquals((await run(["version"])).out, "llmgw 0.1.0\n");
  assertStringIncludes((await run(["agent"])).out, "Usage: llmgw agent inventory");
});

Deno.test("main refuses unknown roles and commands with exit 2 and no stack trace", async () => {
  const cases: [string[], string][] = [
    [["frobnicate"], 'unknown role or command "frobnicate"'],
    [["agent", "fly"], 'agent: unknown command "fly"'],
    [["control", "fly"], 'control: unknown command "fly" (known: serve, init)'],
    [["nodes"], "nodes: no control plane: set LLMGW_URL or pass --url"],
    [["gateway", "fly"], 'gateway: unknown command "fly" (known: serve)'],
    [
      ["dev", "machines", "--node", "no_such_machine"],
      'dev: no simulated machine "no_such_machine"',
    ],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assertEquals(r.code, 2, args.join(" "));
    assertStringIncludes(r.err, message);
    assertStringIncludes(r.err, "; run 'llmgw ");
    assertEquals(r.err.trimEnd().split("\n").length, 1, `one line: ${r.err}`);
    assertOk(!r.err.includes("    at "));
  }
});

Deno.test("dev discovers one simulated node through the production path", async () => {
  const r = await run(["dev", "machines", "--node", "hgx_a100_40g"]);
  assertEquals(r.err, "");
  assertEquals(r.code, 0);
  assertStringIncludes(r.out, "=== hgx_a100_40g ===");
  assertStringIncludes(r.out, "a100-40g");
});

Deno.test("every command and subcommand has its own --help, also as help COMMAND", async () => {
  for (const path of COMMAND_PATHS) {
    const args = path.split(" ");
    const r = await run([...args, "--help"]);
    assertEquals(r.code, 0, `${path} --help: ${r.err}`);
    assertEquals(r.err, "", path);
    assertStringIncludes(r.out, "Usage:", path);
    assertStringIncludes(r.out, `llmgw ${path}`, path);
    const viaHelp = await run(["help", ...args]);
    assertEquals(viaHelp.out, r.out, `help ${path}`);
    assertEquals((await run([...args, "-h"])).out, r.out, `${path} -h`);
  }
});

Deno.test("a usage error of every command is one line naming the flag and where the fix is", async () => {
  for (const path of COMMAND_PATHS) {
    const args = path.split(" ");
    const r = await run([...args, "--no-such-flag"]);
    assertEquals(r.code, 2, `${path}: ${r.out}${r.err}`);
    assertEquals(r.out, "", path);
    assertEquals(
      r.err,
      `llmgw: ${path}: unknown flag --no-such-flag; run 'llmgw ${path} --help' for usage\n`,
    );
  }
  // Flags that need a value, values that are not numbers, missing arguments.
  const cases: [string[], string][] = [
    [
      ["logs", "x", "--lines"],
      "logs: --lines needs a value, e.g. --lines VALUE; run 'llmgw logs --help'",
    ],
    [["logs", "x", "--lines", "many"], 'logs: --lines must be a whole number, got "many"'],
    [
      ["get"],
      "get: nodes, deployments, replicas, events or models is required; run 'llmgw get --help'",
    ],
    [["get", "pods"], 'get: expected nodes, deployments, replicas, events, models, got "pods"'],
    [["get", "nodes", "-o", "table"], 'get: -o must be wide, json or yaml, got "table"'],
    // Commands that take one name refuse the rest (issue #23 item 3): `scale NAME 1 2` scaled to 1.
    [["scale", "d", "1", "2"], 'scale: unexpected argument "2"; scale takes one DEPLOYMENT and N'],
    [["logs", "r0", "r1"], 'logs: unexpected argument "r1"; logs takes one REPLICA'],
    [["apply", "-f", "a.yaml", "b.yaml"], 'apply: unexpected argument "b.yaml"'],
    [["get", "events", "a", "b"], 'get events: unexpected argument "b"'],
    [["delete", "node"], "delete node: NODE is required, e.g. llmgw delete node gpu-07"],
    [["drain", "n1", "--timeout", "soon"], "drain: --timeout must be a duration such as 90s"],
    [["describe", "pod", "x"], 'describe: expected node, deployment, replica or model, got "pod"'],
    [["describe", "node"], "describe: NAME is required"],
    [["scale", "d", "three"], 'scale: N must be a whole number, got "three"'],
    [["apply"], "apply: -f FILE|DIR|- is required; run 'llmgw apply --help'"],
    [["version", "--json=yes"], "version: --json takes no value; write --json alone"],
    [["schema", "table"], 'schema: expected "schema deployment", got "table"'],
    [["schema", "deployment", "x"], 'schema deployment: unexpected argument "x"'],
    [["version", "now"], 'version: unexpected argument "now"; version takes no argument'],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assertEquals(r.code, 2, args.join(" "));
    assertStringIncludes(r.err, message);
    assertEquals(r.err.trimEnd().split("\n").length, 1, `one line: ${r.err}`);
  }
});

Deno.test("version --json", async () => {
  assertEquals(JSON.parse((await run(["version", "--json"])).out), { version: "0.1.0" });
});
