/**
 * The admin CLI over several names and the commands that wait (issue #23
 * items 3, 9 and 10), against a running control plane (plain HTTP, memory
 * store): lists as kubectl takes them with partial failures, `delete node`,
 * `get -o yaml|json` applied back, `drain` waiting for its replacements, and
 * a reader that leaves early (`| head -1`).
 */
import { join } from "node:path";
import { adminCommand } from "../cli/admin_commands.ts";
import { type AdminControl, adminToken, runCli, withAdminControl } from "./admin_cli_fixture.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { QWEN, reportAll } from "./control_fixture.ts";
import { registration } from "./registration.ts";

const NAME = "cli-lists-test";
const ADMIN = adminToken(NAME);

function withControl(fn: (url: string, c: AdminControl) => Promise<void>) {
  return withAdminControl(NAME, fn);
}

function cli(url: string, ...args: string[]) {
  return runCli(url, ADMIN, ...args);
}

Deno.test("CLI lists: cordon, get, describe and uncordon act on every name; a bad one fails alone, exit 1", async () => {
  await withControl(async (url, control) => {
    for (const id of ["n1", "n2", "n3"]) await control.cp.nodes.register(registration(id), null);

    const cordoned = await cli(url, "cordon", "n1", "n2", "n3");
    assertEquals(cordoned.code, 0, cordoned.err);
    assertEquals(cordoned.out, "node n1: cordoned\nnode n2: cordoned\nnode n3: cordoned\n");
    assertEquals(control.cp.nodes.list().map((n) => n.state), ["cordoned", "cordoned", "cordoned"]);

    // A name that is not there: the others are still acted on, the failure said, exit 1.
    const partly = await cli(url, "uncordon", "n1", "nope", "n3");
    assertEquals(partly.code, 1);
    assertEquals(partly.out, "node n1: ready\nnode n3: ready\n");
    assertStringIncludes(partly.err, "no node nope");
    assertEquals(partly.err.trimEnd().split("\n").length, 1, partly.err);
    assertEquals(control.cp.nodes.list().map((n) => n.state), ["ready", "cordoned", "ready"]);

    const two = await cli(url, "get", "nodes", "n1", "n3");
    assertEquals(two.code, 0, two.err);
    assertEquals(two.out.trimEnd().split("\n").slice(1).map((l) => l.split(/\s+/)[0]), [
      "n1",
      "n3",
    ]);
    const json = await cli(url, "get", "nodes", "n2", "n3", "-o", "json");
    assertEquals(JSON.parse(json.out).map((n: { id: string }) => n.id), ["n2", "n3"]);
    const one = await cli(url, "get", "nodes", "n2", "-o", "json");
    assertEquals(JSON.parse(one.out).id, "n2");
    const missing = await cli(url, "get", "nodes", "n1", "nope");
    assertEquals(missing.code, 1);
    assertOk(/^n1\s/m.test(missing.out), missing.out);
    assertStringIncludes(missing.err, "no node nope");
    const yaml = await cli(url, "get", "nodes", "n1", "-o", "yaml");
    assertEquals(yaml.code, 0, yaml.err);
    assertStringIncludes(yaml.out, "id: n1\n");

    const described = await cli(url, "describe", "node", "n1", "n2");
    assertEquals(described.code, 0, described.err);
    assertEquals(described.out.match(/^Node: /gm)?.length, 2, described.out);
  });
});

Deno.test("CLI: delete node removes a cordoned node; unknown and in-service nodes are refused by name", async () => {
  await withControl(async (url, control) => {
    for (const id of ["n1", "n2"]) await control.cp.nodes.register(registration(id), null);
    const unknown = await cli(url, "delete", "node", "gpu-99");
    assertEquals(unknown.code, 1);
    assertStringIncludes(unknown.err, "no node gpu-99");
    assertEquals(unknown.err.includes("deployment"), false, unknown.err);

    const live = await cli(url, "delete", "node", "n1");
    assertEquals(live.code, 1);
    assertStringIncludes(live.err, "node n1 is ready and in service: cordon or drain it first");

    assertEquals((await cli(url, "cordon", "n1")).code, 0);
    const removed = await cli(url, "delete", "node", "n1", "n2");
    assertEquals(removed.code, 1, "n2 is still in service");
    assertEquals(removed.out, "node n1 removed\n");
    assertEquals(control.cp.nodes.list().map((n) => n.id), ["n2"]);
    const nodes = await cli(url, "get", "nodes");
    assertEquals(nodes.out.includes("n1"), false, nodes.out);
  });
});

Deno.test("CLI: get deployments -o yaml and -o json print what apply -f takes back", async () => {
  await withControl(async (url, control) => {
    await control.cp.nodes.register(registration("n1"), null);
    await control.cp.deployments.apply(QWEN);
    await control.cp.deployments.apply({ ...QWEN, name: "qwen-b", served_model_name: "qwen-b" });
    const dir = await Deno.makeTempDir({ prefix: "llmgw-cli-lists-" });
    try {
      const before = control.cp.deployments.list().map((d) => d.spec);
      for (const format of ["yaml", "json"]) {
        const got = await cli(url, "get", "deployments", "-o", format);
        assertEquals(got.code, 0, got.err);
        const file = join(dir, `all.${format}`);
        await Deno.writeTextFile(file, got.out);
        for (const name of ["qwen", "qwen-b"]) {
          assertEquals((await cli(url, "delete", name)).code, 0);
        }
        assertEquals(control.cp.deployments.list(), []);
        const applied = await cli(url, "apply", "-f", file);
        assertEquals(applied.code, 0, `${format}: ${applied.err}\n${got.out}`);
        assertEquals(control.cp.deployments.list().map((d) => d.spec), before, format);
      }
      // One deployment by name: one document.
      const one = await cli(url, "get", "deployments", "qwen", "-o", "json");
      assertEquals(JSON.parse(one.out), before[0]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
});

Deno.test("CLI: drain waits until its replacements are ready and the node is empty", async () => {
  await withControl(async (url, control) => {
    const cp = control.cp;
    cp.state.retireGraceMs = 0;
    await cp.nodes.register(registration("n1"), null);
    await cp.deployments.apply({ ...QWEN, replicas: 1 });
    await cp.reconcile();
    await reportAll(cp, "n1", "ready");
    await cp.nodes.register(registration("n2"), null);

    let out = "";
    let err = "";
    const ac = new AbortController();
    const draining = adminCommand(
      "drain",
      ["n1", "--url", url, "--token", ADMIN],
      (t) => out += t,
      {
        err: (t) => err += t,
        pollMs: 10,
        signal: ac.signal,
      },
    );
    try {
      // The CLI has started the drain and waits: the replacement starts on n2 first.
      for (let i = 0; i < 500 && !out.includes("1 replica left"); i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assertStringIncludes(out, "node n1: draining, 1 replica left (qwen-r0)");
      await cp.reconcile();
      await reportAll(cp, "n2", "ready");
      await cp.reconcile();
      await cp.reconcile();
      assertEquals(await draining, 0, `${out}${err}`);
    } finally {
      ac.abort();
      await draining.catch(() => {});
    }
    assertEquals(out.trimEnd().split("\n").at(-1), "node n1 drained");
    assertEquals(cp.nodes.get("n1").allocations, []);
  });
});

Deno.test("CLI: drain --timeout exits 1 naming what is left; the drain goes on", async () => {
  await withControl(async (url, control) => {
    const cp = control.cp;
    await cp.nodes.register(registration("n1"), null);
    await cp.deployments.apply({ ...QWEN, replicas: 1 });
    await cp.reconcile();
    await reportAll(cp, "n1", "ready");
    // The replacement starts on n2 and never becomes ready.
    await cp.nodes.register(registration("n2"), null);
    const r = await cli(url, "drain", "n1", "--timeout", "300ms");
    assertEquals(r.code, 1, r.out);
    assertStringIncludes(r.err, "drain: node n1 still holds");
    assertStringIncludes(r.err, "when --timeout ran out; the drain goes on");
    assertEquals(cp.nodes.get("n1").state, "draining");
  });
});

Deno.test("CLI: a reader that leaves early ends the command quietly (llmgw get events | head -1)", async () => {
  await withControl(async (url, control) => {
    for (let i = 0; i < 20; i++) await control.cp.nodes.register(registration(`n${i}`), null);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "main.ts", "get", "events", "--url", url],
      env: { LLMGW_TOKEN: ADMIN },
      stdout: "piped",
      stderr: "piped",
      cwd: new URL("..", import.meta.url).pathname,
    }).spawn();
    try {
      // Close the read end before the command writes: its first write meets a broken pipe.
      await child.stdout.cancel();
      const [status, stderr] = await Promise.all([
        child.status,
        new Response(child.stderr).text(),
      ]);
      assertEquals(stderr, "");
      assertEquals(status.code, 0);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already exited.
      }
    }
  });
});
