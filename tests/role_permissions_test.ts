/**
 * The control and gateway roles run, and do their job, under exactly the
 * permissions their binaries are compiled with (scripts/roles.sh, the one
 * source for `deno task compile` and `deno task bundle`), with prompts off:
 * a permission they lack would fail a request or the start. The agent's
 * `--allow-all` is explained in scripts/roles.sh and docs/supervisor.md.
 *
 * Both processes are killed by pid in a `finally`.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk } from "./assert.ts";
import { until } from "./until.ts";
import { freePortsIn, portsOf } from "./port_plan.ts";
import { postgresAvailable, startPostgres } from "./postgres_server.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The `--allow-*` flags of a role, read from scripts/roles.sh. */
function permsFor(role: string): string[] {
  const text = Deno.readTextFileSync(join(ROOT, "scripts/roles.sh"));
  const m = new RegExp(`^\\s*${role}\\) echo "([^"]*)" ;;`, "m").exec(text);
  if (m === null) throw new Error(`scripts/roles.sh has no permissions for ${role}`);
  return m[1].split(/\s+/);
}

/**
 * Ports from this file's range (tests/port_plan.ts): a port-0 pick closed
 * and handed to a child could be taken meanwhile by another file's port-0
 * listener or outgoing connection (seen once in CI rehearsal: the gateway
 * never came up on its port).
 */
const PORTS = portsOf(import.meta.url);

/** How the waits here poll; a refused connection (not up yet) is retried. */
const POLL = { timeoutMs: 30_000, intervalMs: 100 };

Deno.test("role permissions: scripts/roles.sh grants the agent all, control and gateway only what they list", () => {
  assertEquals(permsFor("agent"), ["--allow-all"]);
  for (const role of ["control", "gateway"]) {
    const perms = permsFor(role);
    assertOk(!perms.includes("--allow-all"), `${role} is narrowed`);
    assertOk(perms.every((p) => p.startsWith("--allow-")), perms.join(" "));
  }
  assertOk(!permsFor("gateway").includes("--allow-run"), "the gateway runs no programs");
  assertOk(!permsFor("gateway").includes("--allow-write"), "the gateway writes no files");
});

Deno.test("role permissions: control and gateway serve under their compiled permissions", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_role_perms_" });
  const [controlPort, gatewayPort, embeddedPort] = freePortsIn(PORTS, 3);
  const control = `http://127.0.0.1:${controlPort}`;
  const spawn = (role: string, args: string[], env: Record<string, string>) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-prompt",
        "--unstable-no-legacy-abort",
        ...permsFor(role),
        join(ROOT, `roles/${role}.ts`),
        ...args,
      ],
      env,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  const procs: Deno.ChildProcess[] = [];
  try {
    procs.push(spawn("control", [
      "serve",
      "--insecure-http",
      "--listen",
      `127.0.0.1:${controlPort}`,
      "--store",
      join(dir, "store"),
      "--gateway-listen",
      `127.0.0.1:${embeddedPort}`,
    ], { LLMGW_ADMIN_TOKEN: "perm-admin", LLMGW_JOIN_TOKEN: "perm-join" }));
    await until("control plane", async () => (await fetch(`${control}/healthz`)).ok, POLL);
    const applied = await fetch(`${control}/v1/deployments`, {
      method: "POST",
      headers: { authorization: "Bearer perm-admin", "content-type": "application/json" },
      body: JSON.stringify({
        name: "demo",
        model: "org/demo",
        replicas: 1,
        profiles: [{ name: "p", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
      }),
    });
    assertEquals(applied.status, 201, "the store is written");
    await applied.body?.cancel();
    assertOk(Deno.statSync(join(dir, "store", "llmgw.db")).isFile);

    // The gateway runs with a gateway token: it may read the endpoint feed and nothing else.
    const minted = await fetch(`${control}/v1/tokens`, {
      method: "POST",
      headers: { authorization: "Bearer perm-admin", "content-type": "application/json" },
      body: JSON.stringify({ kind: "gateway", description: "role permissions test" }),
    });
    assertEquals(minted.status, 201);
    const gatewayToken = (await minted.json()).token as string;
    const refused = await fetch(`${control}/v1/nodes`, {
      headers: { authorization: `Bearer ${gatewayToken}` },
    });
    assertEquals(refused.status, 403, "a gateway token reads no admin route");
    await refused.body?.cancel();
    procs.push(spawn("gateway", [
      "serve",
      "--control",
      control,
      "--listen",
      `127.0.0.1:${gatewayPort}`,
      "--poll-interval",
      "0.2",
    ], { LLMGW_TOKEN: gatewayToken }));
    for (const port of [gatewayPort, embeddedPort]) {
      const gw = `http://127.0.0.1:${port}`;
      // Synced: the deployed model is known (no ready replica: 503, not 404).
      await until(`gateway ${port} synced`, async () => {
        const r = await fetch(`${gw}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: '{"model":"demo","messages":[]}',
        });
        const body = await r.json();
        return r.status === 503 && body.error.code === "model_not_ready";
      }, POLL);
      const models = await fetch(`${gw}/v1/models`);
      assertEquals(models.status, 200);
      assertEquals((await models.json()).data, []);
    }
  } finally {
    for (const p of procs) {
      try {
        p.kill("SIGKILL");
      } catch {
        // Gone.
      }
    }
    for (const p of procs) {
      const out = await p.output();
      const text = new TextDecoder().decode(out.stderr);
      assertOk(!text.includes("PermissionDenied") && !text.includes("NotCapable"), text);
    }
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test({
  name: "role permissions: control serves a shared PostgreSQL store under its compiled permissions",
  ignore: !postgresAvailable().ok,
  async fn() {
    const pg = await startPostgres();
    const dir = await Deno.makeTempDir({ prefix: "llmgw_role_perms_pg_" });
    const [port] = freePortsIn(PORTS, 1);
    let proc: Deno.ChildProcess | null = null;
    try {
      const url = await pg.createDatabase("perms");
      proc = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--no-prompt",
          "--unstable-no-legacy-abort",
          ...permsFor("control"),
          join(ROOT, "roles/control.ts"),
          "serve",
          "--insecure-http",
          "--listen",
          `127.0.0.1:${port}`,
          "--state-dir",
          dir,
          "--gateway-listen",
          "off",
        ],
        env: { LLMGW_STORE_URL: url, LLMGW_ADMIN_TOKEN: "perm-admin" },
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const control = `http://127.0.0.1:${port}`;
      await until("the instance leads", async () => {
        const r = await fetch(`${control}/v1/leader`);
        return r.ok && (await r.json()).role === "leader";
      }, POLL);
      const applied = await fetch(`${control}/v1/deployments`, {
        method: "POST",
        headers: { authorization: "Bearer perm-admin", "content-type": "application/json" },
        body: JSON.stringify({
          name: "demo",
          model: "org/demo",
          replicas: 1,
          profiles: [{ name: "p", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
        }),
      });
      assertEquals(applied.status, 201, "the database is written");
      await applied.body?.cancel();
      assertEquals((await pg.psql("perms", "SELECT name FROM deployments")).trim(), "demo");
    } finally {
      try {
        proc?.kill("SIGKILL");
      } catch {
        // Gone.
      }
      await proc?.output();
      await pg.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
