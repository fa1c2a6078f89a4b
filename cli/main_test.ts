import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { main } from "./main.ts";

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
    assertStringIncludes(r.err, "Run 'llmgw help' for usage.");
    assertOk(!r.err.includes("    at "));
  }
});

Deno.test("dev discovers one simulated node through the production path", async () => {
  const r = await run(["dev", "machines", "--node", "h200_sxm_vm"]);
  assertEquals(r.err, "");
  assertEquals(r.code, 0);
  assertStringIncludes(r.out, "=== h200_sxm_vm ===");
  assertStringIncludes(r.out, "h200-140g");
  assertStringIncludes(r.out, "roce-a");
});
