/**
 * A port that is taken stops `llmgw dev`, `llmgw control serve` and `llmgw
 * gateway serve` with exit code 1 and one line naming the address, the port
 * and the process holding it (issue #13), here the test itself, which holds
 * the port with `Deno.listen`. Each command runs as a real process; the
 * servers' own binds, which report a port taken after the commands' checks,
 * are tested in-process.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertRejects, assertThrows } from "./assert.ts";
import { devPorts } from "../cli/dev_ports.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { startFollowingGateway } from "../gateway/server.ts";
import { BindError } from "../http/bind_error.ts";
import { devBases, spawnLlmgw } from "./dev_processes.ts";
import { portsOf } from "./port_plan.ts";

/** This file's ports (tests/port_plan.ts): room for its `llmgw dev` clusters. */
const PORTS = portsOf(import.meta.url);

/** Runs `llmgw <args>` to its end; its code and output. */
async function run(args: string[], env: Record<string, string> = {}) {
  const p = spawnLlmgw(args, env);
  await p.done;
  return { code: (await p.child.status).code, ...p.output() };
}

/** The one line a held port must produce, the holder being this test process. */
function expectOneLine(
  stderr: string,
  prefix: string,
  address: string,
  port: number,
  what: string,
) {
  const lines = stderr.trimEnd().split("\n");
  assertEquals(lines.length, 1, `one line, got ${JSON.stringify(stderr)}`);
  const want = `${prefix}Cannot listen on ${address}:${port} for ${what}: ` +
    `address already in use by pid ${Deno.pid} (`;
  assertOk(lines[0].startsWith(want), `expected ${JSON.stringify(want)}…, got ${lines[0]}`);
  assertOk(!stderr.includes("    at "), "no stack trace");
}

/** Holds `127.0.0.1:port` while `fn` runs. */
async function holding<T>(port: number, fn: () => Promise<T>): Promise<T> {
  const held = Deno.listen({ hostname: "127.0.0.1", port });
  try {
    return await fn();
  } finally {
    held.close();
  }
}

Deno.test("llmgw dev --port: a held port of its layout names the address, port and holder, and starts nothing", async () => {
  const [base] = devBases(PORTS, 1);
  const layout = devPorts(base);
  const cases: [number, string][] = [
    [layout.control, "the control API"],
    [layout.gateway, "the gateway"],
    [layout.agents[1].api, `agent ${layout.agents[1].node}'s local API`],
    [layout.agents[3].proxy, `agent ${layout.agents[3].node}'s engine proxy`],
  ];
  const dir = await Deno.makeTempDir({ prefix: "llmgw-bind-dev-" });
  try {
    for (const [port, what] of cases) {
      const state = join(dir, String(port));
      const r = await holding(
        port,
        () => run(["dev", "--port", String(base), "--dir", state, "--quiet"]),
      );
      assertEquals(r.code, 1, `${what}: ${JSON.stringify(r)}`);
      expectOneLine(r.stderr, "llmgw: dev: ", "127.0.0.1", port, what);
      assertEquals(r.stdout, "", `${what}: nothing else printed`);
      assertOk(
        !(await Deno.stat(state).then(() => true, () => false)),
        `${what}: no state written`,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("llmgw control serve: a held --listen or --gateway-listen port names its holder", async () => {
  const [base] = devBases(PORTS, 1);
  const [api, gateway] = [base, base + 1];
  const flags = ["--store", ":memory:", "--listen", `127.0.0.1:${api}`];
  const cases: [number, string[], string][] = [
    [api, ["--gateway-listen", "off"], "the control API"],
    [gateway, ["--gateway-listen", `127.0.0.1:${gateway}`], "the gateway"],
  ];
  for (const [port, extra, what] of cases) {
    const r = await holding(port, () => run(["control", "serve", ...flags, ...extra]));
    assertEquals(r.code, 1, `${what}: ${JSON.stringify(r)}`);
    expectOneLine(r.stderr, "llmgw: ", "127.0.0.1", port, what);
    assertEquals(r.stdout, "", `${what}: no token printed, nothing started`);
  }
});

Deno.test("llmgw gateway serve: a held --listen port names its holder", async () => {
  const [base] = devBases(PORTS, 1);
  const r = await holding(
    base,
    () =>
      run(
        ["gateway", "serve", "--control", "http://127.0.0.1:9", "--listen", `127.0.0.1:${base}`],
        { LLMGW_TOKEN: "llmgw_admin_test" },
      ),
  );
  assertEquals(r.code, 1, JSON.stringify(r));
  expectOneLine(r.stderr, "llmgw: ", "127.0.0.1", base, "the gateway");
  assertEquals(r.stdout, "");
});

Deno.test("startControl and startGateway: a port taken after any check is a BindError, and nothing is left running", async () => {
  const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = held.addr.port;
  try {
    const store = new MemoryStore();
    let closed = 0;
    store.close = () => void closed++;
    const e = await assertRejects(
      () => startControl({ hostname: "127.0.0.1", port, store, adminTokens: [], joinTokens: [] }),
      BindError,
      `Cannot listen on 127.0.0.1:${port} for the control API: address already in use by pid ${Deno.pid}`,
    ) as BindError;
    assertEquals([e.address, e.port, closed], ["127.0.0.1", port, 1]);
    assertThrows(
      () =>
        startFollowingGateway({
          hostname: "127.0.0.1",
          port,
          controlUrl: "http://127.0.0.1:9",
          token: "t",
        }),
      BindError,
      `Cannot listen on 127.0.0.1:${port} for the gateway: address already in use by pid ${Deno.pid}`,
    );
  } finally {
    held.close();
  }
});
