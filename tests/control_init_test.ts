/**
 * The service path, as the units in deploy/systemd run it: `llmgw control
 * init` prepares the state and a config file; `control serve --config` and
 * `gateway serve --config` start from files alone (secrets from the
 * environment); the gateway serves HTTPS with an operator's certificate, and
 * a second `init` changes nothing.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "./assert.ts";
import { START_TIMEOUT_MS, until } from "./until.ts";
import { CertificateAuthority, publicKeyHash } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";

const MAIN = fileURLToPath(new URL("../main.ts", import.meta.url));

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function llmgw(args: string[]): Promise<{ code: number; out: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: r.code, out: d.decode(r.stdout) + d.decode(r.stderr) };
}

/** A long-running llmgw process whose stdout is gathered until it prints `ready`. */
function spawn(args: string[], env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, ...args],
    env,
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  return {
    child,
    waitFor: (re: RegExp) =>
      until(`output matching ${re}`, async () => {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the process ended: ${out}`);
        out += value;
        return re.exec(out)?.[1] ?? null;
      }, { timeoutMs: START_TIMEOUT_MS }),
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already gone.
      }
      await child.status;
      await reader.cancel().catch(() => {});
    },
  };
}

Deno.test("control init, then control and gateway serve from config files, HTTPS on both", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_init_" });
  const state = join(dir, "state");
  const etc = join(dir, "etc");
  const port = freePort();
  const procs: { stop(): Promise<void> }[] = [];
  try {
    const init = await llmgw([
      "control",
      "init",
      "--store",
      state,
      "--listen",
      `127.0.0.1:${port}`,
      "--tls-san",
      "control.test",
      "--config-out",
      join(etc, "control.json"),
    ]);
    assertEquals(init.code, 0, init.out);
    const ca = Deno.readTextFileSync(join(state, "tls", "ca.crt"));
    assertStringIncludes(init.out, `key hash sha256:${await publicKeyHash(ca)}`);
    assertEquals(Deno.statSync(join(state, "admin.token")).mode! & 0o777, 0o600);
    const admin = Deno.readTextFileSync(join(state, "admin.token")).trim();
    assertOk(!init.out.includes(admin), "the token is never printed");
    const config = JSON.parse(Deno.readTextFileSync(join(etc, "control.json")));
    assertEquals(config.tls_san, ["control.test"]);

    // A second init keeps the CA, the token and the config.
    const again = await llmgw([
      "control",
      "init",
      "--store",
      state,
      "--config-out",
      join(etc, "control.json"),
    ]);
    assertEquals(again.code, 0, again.out);
    assertStringIncludes(again.out, "kept the cluster CA");
    assertStringIncludes(again.out, "kept the existing config");
    assertEquals(Deno.readTextFileSync(join(state, "tls", "ca.crt")), ca);
    assertEquals(Deno.readTextFileSync(join(state, "admin.token")).trim(), admin);

    const control = spawn(["control", "serve", "--config", join(etc, "control.json")], {});
    procs.push(control);
    const url = await control.waitFor(/listening on (https:\/\/\S+)/);
    const trust = pinnedFetch(ca);
    try {
      const listed = await trust.fetch(`${url}/v1/tokens`, {
        headers: { authorization: `Bearer ${admin}` },
      });
      assertEquals(listed.status, 200);
      assertEquals((await listed.json()).tokens.length, 1, "init made one admin token, serve none");
      const minted = await trust.fetch(`${url}/v1/tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
        body: JSON.stringify({ kind: "gateway" }),
      });
      assertEquals(minted.status, 201);
      const gatewayToken = (await minted.json()).token as string;

      // The operator's certificate for the gateway (here from the cluster CA; any CA works).
      const authority = await CertificateAuthority.load(
        ca,
        Deno.readTextFileSync(join(state, "tls", "ca.key")),
      );
      const served = await authority.issueWithKey({
        commonName: "gateway.test",
        ipAddresses: ["127.0.0.1"],
        use: "server",
        now: Date.now(),
        lifetimeMs: 3_600_000,
      });
      Deno.writeTextFileSync(join(etc, "gateway.crt"), served.cert);
      Deno.writeTextFileSync(join(etc, "gateway.key"), served.key);
      const gwPort = freePort();
      Deno.writeTextFileSync(
        join(etc, "gateway.json"),
        JSON.stringify({
          listen: `127.0.0.1:${gwPort}`,
          control: [url],
          tls_cert: "gateway.crt",
          tls_key: "gateway.key",
          poll_interval: 0.2,
        }),
      );
      const gateway = spawn(["gateway", "serve", "--config", join(etc, "gateway.json")], {
        LLMGW_TOKEN: gatewayToken,
        LLMGW_CA: join(state, "tls", "ca.crt"),
      });
      procs.push(gateway);
      const gw = await gateway.waitFor(/listening on (https:\/\/\S+?),/);
      assertEquals(gw, `https://127.0.0.1:${gwPort}`);
      await until("the gateway answers over TLS", async () => {
        const res = await trust.fetch(`${gw}/v1/models`);
        await res.body?.cancel();
        return res.status === 200;
      });
      await assertRejects(() => fetch(`http://127.0.0.1:${gwPort}/v1/models`), TypeError);
    } finally {
      trust.close();
    }
  } finally {
    for (const p of procs.reverse()) await p.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a config file with an unknown key or a wrong type is refused naming the file and field", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_config_" });
  try {
    const file = join(dir, "control.json");
    Deno.writeTextFileSync(file, JSON.stringify({ listen: "127.0.0.1:0", lisen: "x" }));
    const unknown = await llmgw(["control", "serve", "--config", file]);
    assertEquals(unknown.code, 2, unknown.out);
    assertStringIncludes(unknown.out, `cannot use ${file}`);
    assertStringIncludes(unknown.out, "lisen");
    Deno.writeTextFileSync(file, JSON.stringify({ heartbeat_interval: "5" }));
    const typed = await llmgw(["control", "serve", "--config", file]);
    assertEquals(typed.code, 2, typed.out);
    assertStringIncludes(typed.out, "heartbeat_interval");
    const missing = await llmgw(["gateway", "serve", "--config", join(dir, "nope.json")]);
    assertEquals(missing.code, 2, missing.out);
    assertStringIncludes(missing.out, "cannot read --config");
    assertOk(!missing.out.includes("    at "), "no stack trace");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
