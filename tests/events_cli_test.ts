/**
 * Events tied to an object's identity through the CLI (issue #23 item 10): a
 * deployment deleted and created again under its name shows only its own
 * events in `get events` and `describe`; the earlier one's stay reachable
 * with `--incarnation all` or its uid.
 */
import { adminToken, runCli, withAdminControl } from "./admin_cli_fixture.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { QWEN } from "./control_fixture.ts";
import { registration } from "./registration.ts";

const NAME = "events-cli-test";
const ADMIN = adminToken(NAME);

function cli(url: string, ...args: string[]) {
  return runCli(url, ADMIN, ...args);
}

/** How many lines of `text` hold `word`. */
function count(text: string, word: string): number {
  return text.split("\n").filter((l) => l.includes(word)).length;
}

Deno.test("get events and describe show the deployment that has the name now, not its predecessor", async () => {
  await withAdminControl(NAME, async (url, control) => {
    const cp = control.cp;
    await cp.nodes.register(registration("n1"), null);
    await cp.deployments.apply(QWEN);
    await cp.reconcile();
    await cp.deployments.delete(QWEN.name);
    await cp.reconcile();
    await cp.deployments.apply(QWEN);
    await cp.reconcile();

    const current = await cli(url, "get", "events", "deployment/qwen");
    assertEquals(current.code, 0, current.err);
    assertEquals(count(current.out, "deployment_created"), 1, current.out);
    assertEquals(count(current.out, "deployment_deleted"), 0, current.out);

    const described = await cli(url, "describe", "deployment", "qwen");
    assertEquals(described.code, 0, described.err);
    assertEquals(count(described.out, "deployment_deleted"), 0, described.out);
    assertEquals(count(described.out, "deployment_created"), 1, described.out);

    const all = await cli(
      url,
      "get",
      "events",
      "deployment/qwen",
      "--incarnation",
      "all",
      "-o",
      "wide",
    );
    assertEquals(all.code, 0, all.err);
    assertStringIncludes(all.out, "INCARNATION");
    assertEquals(count(all.out, "deployment_created"), 2, all.out);
    assertEquals(count(all.out, "deployment_deleted"), 1, all.out);

    // One earlier incarnation by its uid, as --json shows it.
    const json = await cli(
      url,
      "get",
      "events",
      "deployment/qwen",
      "--incarnation",
      "all",
      "--json",
    );
    const events = JSON.parse(json.out) as { kind: string; uid: string }[];
    const older = events[0].uid;
    assertOk(older !== "" && older !== events[2].uid, json.out);
    const one = await cli(
      url,
      "get",
      "events",
      "deployment/qwen",
      "--incarnation",
      older,
      "--json",
    );
    assertEquals(
      (JSON.parse(one.out) as { kind: string }[]).map((e) => e.kind),
      ["deployment_created", "deployment_deleted"],
    );

    const bad = await cli(url, "get", "events", "deployment/qwen", "--incarnation", "no such!");
    assertOk(bad.code !== 0);
    assertStringIncludes(bad.err, "incarnation");
    assertOk(!bad.err.includes("    at "), bad.err);
  });
});
