import { join } from "node:path";
import { createLogger } from "../log/log.ts";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import { AgentError, type AgentOptions } from "./agent_options.ts";
import { setUpAgent } from "./agent_setup.ts";
import { localTokenPath } from "./credentials.ts";

function options(stateDir: string, extra: Partial<AgentOptions> = {}): AgentOptions {
  return {
    controlUrl: "http://127.0.0.1:1",
    joinToken: "join-token-not-logged-0123456789",
    stateDir,
    mgmtAddr: "127.0.0.1",
    mgmtInterface: "lo",
    ...extra,
  };
}

function capture(): { lines: string[]; log: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  return { lines, log: createLogger("agent", (l) => lines.push(l)) };
}

Deno.test("setUpAgent over http: no TLS and a warning, the management address, one local token kept", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_setup_" });
  try {
    const stateDir = join(dir, "state");
    const { lines, log } = capture();
    const first = await setUpAgent(options(stateDir), log);
    assertEquals(first.tls, null);
    assertEquals(first.mgmt, { addr: "127.0.0.1", iface: "lo" });
    assertEquals((await Deno.stat(stateDir)).mode! & 0o777, 0o700);
    assertEquals(Deno.readTextFileSync(localTokenPath(stateDir)).trim(), first.localToken);
    const warn = lines.map((l) => JSON.parse(l)).find((l) => l.level === "warn");
    assertOk(warn, "the plain-HTTP warning");
    assertStringIncludes(warn.msg, "plain HTTP");
    // A restarted agent keeps its token: the control plane calls it with the registered one.
    const again = await setUpAgent(options(stateDir), log);
    assertEquals(again.localToken, first.localToken);
    assertEquals(lines.some((l) => l.includes(first.localToken)), false, "the token logged");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("setUpAgent leaves an existing wider state directory as it is, warning with its mode and the fix, and narrows its own secrets in it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_setup_" });
  try {
    // A shared parent (say /var/lib/llmgw, where the control plane keeps its state too).
    Deno.chmodSync(dir, 0o755);
    const neighbour = join(dir, "control");
    Deno.mkdirSync(neighbour, { mode: 0o755 });
    // Copied in without modes: the agent's own secrets came back 0644 and 0755.
    Deno.writeTextFileSync(localTokenPath(dir), "local-token-0123456789abcdef\n", { mode: 0o644 });
    Deno.chmodSync(localTokenPath(dir), 0o644);
    Deno.mkdirSync(join(dir, "tls"), { mode: 0o755 });
    Deno.chmodSync(join(dir, "tls"), 0o755);
    const { lines, log } = capture();
    await setUpAgent(options(dir), log);
    assertEquals((await Deno.stat(dir)).mode! & 0o777, 0o755);
    assertEquals((await Deno.stat(neighbour)).mode! & 0o777, 0o755);
    assertEquals((await Deno.stat(localTokenPath(dir))).mode! & 0o777, 0o600);
    assertEquals((await Deno.stat(join(dir, "tls"))).mode! & 0o777, 0o700);
    const logged = lines.map((l) => JSON.parse(l));
    const warn = logged.find((l) => l.msg.startsWith("state directory"));
    assertOk(warn, "the wide directory warned");
    assertEquals([warn.level, warn.path, warn.mode, warn.fix], [
      "warn",
      dir,
      "0755",
      `chmod 700 ${dir}`,
    ]);
    const narrowed = logged.filter((l) => l.msg.startsWith("narrowed")).map((l) => [l.path, l.was]);
    assertEquals(narrowed, [[join(dir, "tls"), "0755"], [localTokenPath(dir), "0644"]]);
    assertEquals(lines.some((l) => l.includes("local-token-0123456789abcdef")), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("setUpAgent takes a given local token as is and creates no token file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_setup_" });
  try {
    const set = await setUpAgent(options(dir, { localToken: "given-local-token" }), capture().log);
    assertEquals(set.localToken, "given-local-token");
    await assertRejects(() => Deno.stat(localTokenPath(dir)), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("setUpAgent refuses a state directory it cannot create, naming it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_setup_" });
  try {
    const file = join(dir, "a-file");
    Deno.writeTextFileSync(file, "");
    const stateDir = join(file, "state");
    await assertRejects(
      () => setUpAgent(options(stateDir), capture().log),
      AgentError,
      `cannot create state directory ${stateDir}`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("setUpAgent refuses a management interface without an address, naming it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_setup_" });
  try {
    const o = options(dir, { mgmtAddr: undefined, mgmtInterface: "nosuch0" });
    await assertRejects(
      () => setUpAgent(o, capture().log),
      AgentError,
      "management interface nosuch0 has no usable address",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
