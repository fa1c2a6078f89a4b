/**
 * `llmgw apply` against a running control plane (plain HTTP, memory store):
 * the dev example applied as `llmgw dev` applies it, then re-applied from
 * its file, is unchanged; `--dry-run` shows the changes and the replicas
 * that would roll, and changes nothing.
 */
import { join } from "node:path";
import { type AdminControl, adminToken, runCli, withAdminControl } from "./admin_cli_fixture.ts";
import { parseDeploymentText } from "../deployment/load.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { registration } from "./registration.ts";

const NAME = "apply-diff-cli-test";
const ADMIN = adminToken(NAME);
const EXAMPLE = new URL("../dev/samples/llama-8b.yaml", import.meta.url).pathname;

function withControl(fn: (url: string, c: AdminControl) => Promise<void>) {
  return withAdminControl(NAME, fn);
}

function cli(url: string, ...args: string[]) {
  return runCli(url, ADMIN, ...args);
}

Deno.test("llmgw apply: the dev example re-applied from its file is unchanged; --dry-run shows the diff and the replicas that would roll", async () => {
  await withControl(async (url, control) => {
    const cp = control.cp;
    for (const id of ["h1", "h2"]) {
      const reg = registration(id, "h100_sxm_vm");
      await cp.nodes.register({
        ...reg,
        gpus: reg.gpus.map((g) => ({ ...g, health: { ...g.health, problems: [] } })),
      }, null);
    }
    // As `llmgw dev` applies it: the spec it parsed itself.
    const text = await Deno.readTextFile(EXAMPLE);
    await cp.deployments.apply(parseDeploymentText(text, EXAMPLE).deployment);
    await cp.reconcile();
    const replicas = cp.replicas().map((r) => r.id).sort();
    assertEquals(replicas.length, 3);
    const before = JSON.stringify([cp.deployments.list(), cp.replicas()]);

    const again = await cli(url, "apply", "-f", EXAMPLE);
    assertEquals(again.code, 0, again.err);
    assertStringIncludes(again.out, "deployment/llama-8b unchanged\n");
    await cp.reconcile();
    assertEquals(JSON.stringify([cp.deployments.list(), cp.replicas()]), before);

    const dir = await Deno.makeTempDir({ prefix: "llmgw-apply-cli-" });
    try {
      const file = join(dir, "llama-8b.yaml");
      await Deno.writeTextFile(
        file,
        text.replace("replicas: 3", "replicas: 4").replace(
          "    quantization: fp8\n",
          "    quantization: fp8\n    engine_args: [--max-model-len, '8192']\n",
        ),
      );
      const dry = await cli(url, "apply", "-f", file, "--dry-run");
      assertEquals(dry.code, 0, dry.err);
      const lines = dry.out.split("\n").filter((l) => !l.startsWith("warning:"));
      assertEquals(lines.slice(0, 3), [
        `deployment/llama-8b updated (dry run): revision 2, would replace 3 replicas one at ` +
        `a time (${replicas.join(", ")})`,
        `  profiles[0].engine_args: [] → ["--max-model-len","8192"]`,
        `  replicas: 3 → 4 (no restart)`,
      ]);
      const json = await cli(url, "apply", "-f", file, "--dry-run", "--json");
      assertEquals(json.code, 0, json.err);
      const [answer] = JSON.parse(json.out);
      assertEquals([answer.source, answer.result, answer.dry_run, answer.rolling], [
        file,
        "updated",
        true,
        replicas,
      ]);
      // A dry run of a document the control plane refuses exits 1 naming the field.
      await Deno.writeTextFile(join(dir, "bad.yaml"), text.replace("replicas: 3", "replicas: -1"));
      const bad = await cli(url, "apply", "-f", join(dir, "bad.yaml"), "--dry-run");
      assertEquals(bad.code, 1);
      assertStringIncludes(bad.err, "replicas");
      await cp.reconcile();
      assertEquals(JSON.stringify([cp.deployments.list(), cp.replicas()]), before);
      // The apply itself does what the dry run said.
      const applied = await cli(url, "apply", "-f", file);
      assertEquals(applied.code, 0, applied.err);
      assertOk(applied.out.includes("deployment/llama-8b updated: revision 2, replacing 3"));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
});
