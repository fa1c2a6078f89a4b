import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, testControl, thrown } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import type { Fetch } from "./agent_logs.ts";
import { AgentUnavailableError, NotFoundError } from "./errors.ts";

/** A control plane with one placed replica on a node whose agent answers with `answer`. */
async function withAgent(answer: Fetch, agentUrl: string | null = "http://127.0.0.1:9/") {
  const asked: string[] = [];
  const fetcher: Fetch = (url, init) => {
    asked.push(`${url} ${new Headers(init.headers).get("authorization")}`);
    return answer(url, init);
  };
  const { cp } = await testControl({ fetch: fetcher });
  await cp.nodes.register(
    registration("n1", undefined, { agent_url: agentUrl, agent_token: "llmgw_local_t" }),
    null,
  );
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  return { cp, asked };
}

Deno.test("shard logs come from the node's agent with its local token", async () => {
  const { cp, asked } = await withAgent(() =>
    Promise.resolve(Response.json({ id: "qwen-r0.1/0", state: "ready", lines: ["a", "b"] }))
  );
  assertEquals(await cp.agentLogs.shard("qwen-r0", 0, 2), {
    shard_id: "qwen-r0.1/0",
    node: "n1",
    state: "ready",
    lines: ["a", "b"],
    log_id: null,
    first: null,
    probe_lines_hidden: null,
  });
  assertEquals(asked, [
    "http://127.0.0.1:9/v1/shards/qwen-r0.1%2F0/logs?lines=2 Bearer llmgw_local_t",
  ]);
});

Deno.test("shard logs: the agent's positions pass through, for followers", async () => {
  const { cp } = await withAgent(() =>
    Promise.resolve(
      Response.json({
        id: "qwen-r0.1/0",
        state: "ready",
        lines: ["c"],
        log_id: "L",
        first: 2,
        probe_lines_hidden: 7,
      }),
    )
  );
  const logs = await cp.agentLogs.shard("qwen-r0", 0, 1);
  assertEquals(
    [logs.log_id, logs.first, logs.lines, logs.probe_lines_hidden],
    ["L", 2, ["c"], 7],
  );
});

Deno.test("shard logs: every way an agent can fail is a named 502, never a crash", async () => {
  const cases: [string, Fetch, string, string][] = [
    [
      "an error answer",
      () =>
        Promise.resolve(Response.json({ error: { code: "x", message: "no such shard" } }, {
          status: 404,
        })),
      "agent_error",
      "answered 404: no such shard",
    ],
    [
      "an answer of the wrong shape",
      () => Promise.resolve(Response.json({ id: "x", state: "ready", lines: [1] })),
      "agent_error",
      "lines",
    ],
    ["not JSON", () => Promise.resolve(new Response("<html>")), "agent_error", "answered with"],
    [
      "unreachable",
      () => Promise.reject(new TypeError("connection refused")),
      "agent_unreachable",
      "connection refused",
    ],
  ];
  for (const [name, answer, code, text] of cases) {
    const { cp } = await withAgent(answer);
    const e = await thrown(cp.agentLogs.shard("qwen-r0", 0, 10));
    assertOk(e instanceof AgentUnavailableError, name);
    assertEquals(e.code, code, name);
    assertStringIncludes(e.message, text);
  }
  const { cp } = await withAgent(() => Promise.reject(new Error("never asked")), null);
  const none = await thrown(cp.agentLogs.shard("qwen-r0", 0, 10));
  assertOk(none instanceof AgentUnavailableError);
  assertEquals(none.code, "agent_unavailable");
  assertOk((await thrown(cp.agentLogs.shard("qwen-r0", 1, 10))) instanceof NotFoundError);
  assertOk((await thrown(cp.agentLogs.shard("nope", 0, 10))) instanceof NotFoundError);
});
