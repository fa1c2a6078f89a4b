/**
 * The admin CLI against a running control plane (plain HTTP, memory store):
 * get with a name, describe, explain with the live per-node reasons and the
 * last failure, `--json` on every mutation (the object changed), apply from
 * a directory and from standard input, and `logs -f` following a log.
 */
import { join } from "node:path";
import { adminCommand } from "../cli/admin_commands.ts";
import { type AdminControl, adminToken, runCli, withAdminControl } from "./admin_cli_fixture.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { reportAll } from "./control_fixture.ts";
import { registration } from "./registration.ts";

const NAME = "admin-cli-test";
const ADMIN = adminToken(NAME);

const DEPLOYMENT = `name: qwen
model: Qwen/Qwen2.5-7B-Instruct
replicas: 1
profiles:
  - name: tp2
    engine: vllm
    gpu_class: rtx4090-24g
    tensor_parallel: 2
`;

function withControl(fn: (url: string, c: AdminControl) => Promise<void>) {
  return withAdminControl(NAME, fn);
}

function cli(url: string, ...args: string[]) {
  return runCli(url, ADMIN, ...args);
}

Deno.test("admin CLI: get NAME, describe, explain with per-node reasons, --json on every mutation", async () => {
  await withControl(async (url, control) => {
    const cp = control.cp;
    for (const id of ["n1", "n2"]) await cp.nodes.register(registration(id), null);
    const dir = await Deno.makeTempDir({ prefix: "llmgw-admin-cli-" });
    try {
      await Deno.writeTextFile(join(dir, "qwen.yaml"), DEPLOYMENT);
      await Deno.writeTextFile(join(dir, "notes.txt"), "not a deployment");
      const applied = await cli(url, "apply", "-f", dir, "--json");
      assertEquals(applied.code, 0, applied.err);
      const [one] = JSON.parse(applied.out);
      assertEquals([one.source, one.deployment.name, one.created], [
        join(dir, "qwen.yaml"),
        "qwen",
        true,
      ]);

      // Mutations print the object changed with --json.
      const cordon = await cli(url, "cordon", "n2", "--json");
      assertEquals(cordon.code, 0, cordon.err);
      assertEquals(JSON.parse(cordon.out).state, "cordoned");
      await cp.reconcile();
      await cp.reconcile();

      const getNode = await cli(url, "get", "nodes", "n2");
      assertEquals(getNode.code, 0, getNode.err);
      const rows = getNode.out.trimEnd().split("\n");
      assertEquals(rows.length, 2, getNode.out);
      assertOk(/^n2\s+cordoned\s/.test(rows[1]), rows[1]);
      assertEquals(JSON.parse((await cli(url, "get", "nodes", "n1", "-o", "json")).out).id, "n1");

      const deployments = await cli(url, "get", "deployments", "-o", "wide");
      assertOk(/^qwen\s+0\/1\s/m.test(deployments.out), deployments.out);

      // describe node: GPUs with who holds them, fabrics, events.
      const node = await cli(url, "describe", "node", "n1");
      assertEquals(node.code, 0, node.err);
      assertStringIncludes(node.out, "HELD BY");
      assertStringIncludes(node.out, "qwen-r0");
      assertStringIncludes(node.out, "node_registered");

      // explain: the live inventory's per-node reasons, as plan prints them.
      const explained = await cli(url, "explain", "qwen");
      assertEquals(explained.code, 0, explained.err);
      assertStringIncludes(explained.out, "on the live inventory (2 nodes, every node)");
      assertStringIncludes(explained.out, "n2: node_cordoned");

      // A replica crash-looping on an engine-argument typo: its last failure and log tail.
      // The supervisor restarts it with backoff, reporting the last failure meanwhile.
      await reportAll(cp, "n1", "starting", {
        restarts: 3,
        last_failure: {
          at: Date.now(),
          reason: "exited with code 2: unrecognized arguments: --max-model-lenn",
          exit_code: 2,
          signal: null,
          log_tail: ["vllm serve: error: unrecognized arguments: --max-model-lenn"],
          permanent: false,
        },
      });
      const described = await cli(url, "describe", "replica", "qwen-r0");
      assertEquals(described.code, 0, described.err);
      assertStringIncludes(described.out, "rank 0 last failure: exited with code 2");
      assertStringIncludes(described.out, "log tail:");
      assertStringIncludes(described.out, "--max-model-lenn");
      assertStringIncludes(described.out, "n2: node_cordoned");
      // The agent has no local API here: describe says so instead of failing.
      assertStringIncludes(described.out, "the agent could not be asked");

      const scaled = await cli(url, "scale", "qwen", "2", "--json");
      assertEquals(scaled.code, 0, scaled.err);
      assertEquals(JSON.parse(scaled.out).spec.replicas, 2);
      const uncordon = await cli(url, "uncordon", "n2", "--json");
      assertEquals(JSON.parse(uncordon.out).state, "ready");
      const drain = await cli(url, "drain", "n2", "--json");
      assertEquals(JSON.parse(drain.out).state, "draining");
      const deleted = await cli(url, "delete", "qwen", "--json");
      assertEquals(deleted.code, 0, deleted.err);
      assertEquals(JSON.parse(deleted.out).name, "qwen");
      assertEquals(cp.deployments.list(), []);

      // get events: one line each.
      const events = await cli(url, "get", "events");
      for (const line of events.out.trimEnd().split("\n").slice(1)) {
        assertOk(/^\d{4}-\d\d-\d\dT/.test(line), `one event per line: ${line}`);
      }
      // An error from the control plane: exit 1, its message, no stack trace.
      const missing = await cli(url, "describe", "deployment", "nope");
      assertEquals(missing.code, 1);
      assertStringIncludes(missing.err, "no deployment nope");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
});

Deno.test("admin CLI: apply -f - reads several YAML documents from standard input", async () => {
  await withControl(async (url, control) => {
    await control.cp.nodes.register(registration("n1"), null);
    const stdin = `${DEPLOYMENT}---\n${DEPLOYMENT.replace("name: qwen", "name: qwen-b")}`;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "main.ts", "apply", "-f", "-", "--url", url],
      env: { LLMGW_TOKEN: ADMIN },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      cwd: new URL("..", import.meta.url).pathname,
    }).spawn();
    try {
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(stdin));
      await w.close();
      const { code, stdout, stderr } = await child.output();
      const [out, err] = [stdout, stderr].map((b) => new TextDecoder().decode(b));
      assertEquals(code, 0, err);
      assertStringIncludes(out, "deployment/qwen created");
      assertStringIncludes(out, "deployment/qwen-b created");
    } finally {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already exited.
      }
    }
    assertEquals(control.cp.deployments.list().map((d) => d.name).sort(), ["qwen", "qwen-b"]);
  });
});

/** Runs `logs -f` against a stand-in control plane whose log grows by one line per read. */
async function followStandIn(
  lineAt: (i: number) => string,
  positions: boolean,
  until: RegExp,
): Promise<string[]> {
  let reads = 0;
  const ac = new AbortController();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    if (!new URL(req.url).pathname.endsWith("/logs")) return new Response("{}", { status: 404 });
    reads++;
    const all = Array.from({ length: 3 + reads }, (_, i) => lineAt(i));
    // The agent answers the last 3 lines, and where they start when it can say.
    const first = all.length - 3;
    return Response.json({
      shard_id: "s",
      node: "n1",
      state: "ready",
      lines: all.slice(first),
      ...(positions ? { log_id: "L", first } : {}),
    });
  });
  let out = "";
  try {
    const url = `http://127.0.0.1:${server.addr.port}`;
    const running = adminCommand(
      "logs",
      ["r0", "-f", "--interval", "10", "--lines", "3", "--url", url, "--token", ADMIN],
      (t) => {
        out += t;
        if (until.test(out)) ac.abort();
      },
      { signal: ac.signal },
    );
    assertEquals(await running, 0);
  } finally {
    await server.shutdown();
  }
  return out.trimEnd().split("\n").slice(1);
}

Deno.test("admin CLI: logs -f prints each new line once until stopped", async () => {
  // An agent without positions: the overlap of two reads tells what is new.
  assertEquals(
    await followStandIn((i) => `line ${i}`, false, /line 8\n/),
    Array.from({ length: 9 }, (_, i) => `line ${i}`).slice(1),
  );
  // With positions, a line repeated word for word is printed each time it is written.
  const same = await followStandIn(() => "same", true, /(same\n){9}/);
  assertEquals(same, Array.from({ length: 9 }, () => "same"));
});
