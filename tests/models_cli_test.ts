/**
 * `llmgw models pull`, `get models`, `describe model`, `models pulls` and
 * `models cancel` against a running control plane (plain HTTP, memory
 * store; issue #25 item 5): a pull names who fetches and who holds it
 * already, the list shows each host's state as agents report it, describe
 * shows the revision's commit, facts and hosts, the pulls list shows each
 * node's state (a failed one with its kind and the hub's words) and a
 * cancel stops one; bad usage exits 2 before anything is sent.
 */
import { MemoryStore } from "../control/store/memory_store.ts";
import { requestPull } from "../control/model_pulls.ts";
import { startControl } from "../control/server.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import { adminToken, runCli } from "./admin_cli_fixture.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { fixtureFacts } from "./model_configs.ts";
import { cacheHolding } from "./model_cache_report.ts";
import { registration } from "./registration.ts";

const NAME = "models-cli-test";
const ADMIN = adminToken(NAME);
const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";

function report(state: "complete" | "downloading", done: number): ModelCacheReport {
  return cacheHolding({
    repo: MODEL,
    commit: COMMIT,
    bytes: 2 * 2 ** 30,
    state,
    bytesDone: done,
    roomBytes: 100 * 2 ** 30,
  });
}

Deno.test("models CLI: pull, get models with each host's state, describe model", async () => {
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: [`llmgw_join_${NAME}`],
    reconcileMs: 3_600_000,
    modelFacts: {
      facts: () => Promise.resolve(fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024])),
    },
    commits: { resolveCommit: () => Promise.resolve(COMMIT) },
  });
  try {
    const { cp, url } = control;
    const cli = (...args: string[]) => runCli(url, ADMIN, ...args);
    for (const id of ["n1", "n2", "n3"]) await cp.nodes.register(registration(id), null);
    await cp.deployments.apply({
      name: "qwen",
      model: MODEL,
      replicas: 1,
      profiles: [{ name: "tp2", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 2 }],
    });
    for (const n of ["n1", "n2"]) {
      await cp.nodes.heartbeat({
        node_id: n,
        generation: 0,
        shards: [],
        model_cache: { room_bytes: 0, revisions: [], omitted: 0, evicted: [] },
      });
    }
    await cp.nodes.heartbeat({
      node_id: "n3",
      generation: 0,
      shards: [],
      model_cache: report("complete", 2 * 2 ** 30),
    });

    const pulled = await cli("models", "pull", "qwen", "--nodes", "n1,n2,n3");
    assertEquals(pulled.code, 0, pulled.err);
    assertEquals(
      pulled.out,
      `pulling ${MODEL}@4b1c2a9 onto n1, n2 (follow with llmgw get models)\nn3 holds it already\n`,
    );
    await cp.nodes.heartbeat({
      node_id: "n1",
      generation: 0,
      shards: [],
      model_cache: report("downloading", 2 ** 30),
    });

    const listed = await cli("get", "models");
    assertEquals(listed.code, 0, listed.err);
    const rows = listed.out.trimEnd().split("\n");
    assertOk(/^MODEL\s+REVISION\s+SIZE\s+PINNED\s+DEPLOYMENTS\s+HOSTS$/.test(rows[0]), rows[0]);
    assertEquals(rows.length, 2, listed.out);
    assertOk(
      rows[1].startsWith(MODEL) && rows[1].includes("main@4b1c2a9") &&
        rows[1].includes("2.0 GiB") &&
        rows[1].endsWith("n1 downloading 50%, n2 requested, n3 complete"),
      rows[1],
    );
    const json = JSON.parse((await cli("get", "models", MODEL, "-o", "json")).out);
    assertEquals(json[0].hosts.map((h: { node: string }) => h.node), ["n1", "n2", "n3"]);
    const missing = await cli("get", "models", "acme/none");
    assertEquals(missing.code, 1);
    assertStringIncludes(missing.err, "no model acme/none");

    const described = await cli("describe", "model", MODEL);
    assertEquals(described.code, 0, described.err);
    for (
      const part of [
        `Model:        ${MODEL}`,
        `Revision:     main → ${COMMIT}`,
        "Deployments:  qwen",
        "28 attention / 4 KV heads",
        "n1    downloading 50%",
      ]
    ) assertStringIncludes(described.out, part);
    const unknown = await cli("describe", "model", "acme/none");
    assertEquals(unknown.code, 1);
    assertStringIncludes(unknown.err, "no model acme/none");

    // The pull is listed; cancelled on n2, n2 is asked no more.
    const pulls = await cli("models", "pulls");
    assertEquals(pulls.code, 0, pulls.err);
    const [head, row] = pulls.out.trimEnd().split("\n");
    assertOk(/^PULL\s+STATE\s+FINISHED\s+NODES$/.test(head), head);
    assertOk(/^\S+@4b1c2a9\s+pulling\s+-\s+n1 requested, n2 requested$/.test(row), row);
    // What the PULL column shows is what models cancel takes.
    const shown = row.split(/\s+/)[0];
    const cancelled = await cli("models", "cancel", shown, "--nodes", "n2");
    assertEquals(cancelled.code, 0, cancelled.err);
    assertEquals(
      cancelled.out,
      `${MODEL}@${COMMIT}: pulling\nn1 requested, n2 cancelled (cancelled by an operator)\n`,
    );
    // Naming n2 again: refused, saying why.
    const twice = await cli("models", "cancel", shown, "--nodes", "n2");
    assertEquals(twice.code, 1);
    assertStringIncludes(twice.err, "n2 was cancelled already (cancelled by an operator)");
    // n1's agent reports the pull failed for good: listed failed with its kind and the hub's words.
    const notFound = `model ${MODEL} revision ${COMMIT} not found on https://hub.example`;
    await cp.nodes.heartbeat({
      node_id: "n1",
      generation: 0,
      shards: [],
      model_cache: {
        room_bytes: 0,
        revisions: [],
        omitted: 0,
        evicted: [],
        pulls_failed: [{
          repo: MODEL,
          commit: COMMIT,
          kind: "revision_not_found",
          message: notFound,
          at: 1,
        }],
      },
    });
    const failed = (await cli("models", "pulls")).out.trimEnd().split("\n")[1];
    assertOk(/^\S+@4b1c2a9\s+failed\s+\d{4}-/.test(failed), failed);
    assertOk(
      failed.endsWith(
        `n1 failed (revision_not_found: ${notFound}), n2 cancelled (cancelled by an operator)`,
      ),
      failed,
    );
    // get models and describe model say it too: first of the hosts, with the hub's words.
    const failedRow = (await cli("get", "models")).out.trimEnd().split("\n")[1];
    assertOk(
      failedRow.endsWith(`n1 failed (revision_not_found: ${notFound}), n3 complete`),
      failedRow,
    );
    const describedFailed = (await cli("describe", "model", MODEL)).out;
    assertOk(/\n {4}n1 {4}failed {2}/.test(describedFailed), describedFailed);
    assertOk(
      new RegExp(
        `\n  Failed pulls \\(llmgw models pull asks again\\):\n    n1 at \\d{4}-\\S+Z: revision_not_found: ${
          notFound.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")
        }\n`,
      ).test(describedFailed),
      describedFailed,
    );
    const again = await cli("models", "cancel", `${MODEL}@${"f".repeat(40)}`);
    assertEquals(again.code, 1);
    assertStringIncludes(again.err, "no pull");

    // A second pull of the model whose commit shares 7 digits: the column grows to tell them apart.
    const twin = "4b1c2a9" + "0".repeat(33);
    await cp.state.locked(() => requestPull(cp.state, MODEL, twin, ["n1", "n2"]));
    const both = (await cli("models", "pulls")).out.trimEnd().split("\n").slice(1);
    const names = both.map((r) => r.split(/\s+/)[0]);
    assertEquals(names, [`${MODEL}@4b1c2a90`, `${MODEL}@4b1c2a9d`]);
    const ambiguous = await cli("models", "cancel", `${MODEL}@4b1c2a9`);
    assertEquals(ambiguous.code, 1);
    assertStringIncludes(ambiguous.err, "is ambiguous");
    assertEquals((await cli("models", "cancel", names[0], "--nodes", "n1")).code, 0);
    // n1 named again with n2: n2 is cancelled, and the answer says n1 was already.
    const partly = await cli("models", "cancel", names[0], "--nodes", "n1,n2");
    assertEquals(partly.code, 0, partly.err);
    assertEquals(
      partly.out,
      `${MODEL}@${twin}: cancelled\n` +
        "n1 cancelled (cancelled by an operator), n2 cancelled (cancelled by an operator)\n" +
        "not cancelled: n1 was cancelled already (cancelled by an operator)\n",
    );
  } finally {
    await control.close();
  }
});

Deno.test("models CLI: bad usage is refused before anything is sent", async () => {
  // No control plane listens here: a usage error must come first.
  const url = "http://127.0.0.1:9";
  for (
    const [args, says] of [
      [["models"], 'models: expected pull, pulls or cancel, got ""'],
      [["models", "push", "qwen"], 'models: expected pull, pulls or cancel, got "push"'],
      [["models", "pulls", "x"], 'unexpected argument "x"'],
      [["models", "pulls", "--nodes", "n1"], "models pulls: takes no --nodes"],
      [["models", "cancel"], "models cancel: PULL is required"],
      [["models", "pull"], "models pull: DEPLOYMENT is required"],
      [["models", "pull", "a", "b"], 'unexpected argument "b"'],
      [["models", "pull", "a", "--nodes", "n1,,n2"], "--nodes has an empty name"],
      [["describe", "modle", "x"], "describe: expected node, deployment, replica or model"],
    ] as const
  ) {
    const r = await runCli(url, ADMIN, ...args);
    assertEquals(r.code, 2, `${args.join(" ")}: ${r.err}`);
    assertStringIncludes(r.err, says);
  }
});
