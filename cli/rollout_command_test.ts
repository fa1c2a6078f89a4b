import { assertEquals, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import { ROLLOUT_USAGE, rolloutCommand, statusText } from "./rollout_command.ts";
import { UsageError } from "./usage_error.ts";

const T0 = Date.UTC(2026, 11, 1, 16, 0, 0);

const STATUS = {
  deployment: "llama",
  revision: 3,
  state: "progressing",
  desired: 2,
  ready: 2,
  updated: 1,
  replicas_by_revision: [
    { revision: 2, replicas: 2, ready: 2 },
    { revision: 3, replicas: 1, ready: 0 },
  ],
  rollout: {
    target: 3,
    fallback: 2,
    started_at: T0,
    progress_at: T0,
    deadline_at: T0 + 600_000,
    steps: 0,
    step: { replaced: "llama-r0", by: "llama-r0-v3", mode: "surge", started_at: T0 },
  },
  replicas: [
    { id: "llama-r0", index: 0, revision: 2, state: "ready" },
    { id: "llama-r0-v3", index: 0, revision: 3, state: "loading" },
    { id: "llama-r1", index: 1, revision: 2, state: "ready" },
  ],
};

const REVISIONS = {
  deployment: "llama",
  revision: 3,
  revisions: [
    {
      revision: 1,
      spec: { model: "org/llama" },
      applied_at: T0,
      cause: "apply",
      from_revision: null,
      outcome: "complete",
      reason: null,
    },
    {
      revision: 2,
      spec: { model: "org/llama-2" },
      applied_at: T0 + 1_000,
      cause: "apply",
      from_revision: null,
      outcome: "failed",
      reason: "replica llama-r0-v2 failed: unrecognized arguments:\n--max-model-lenn",
    },
    {
      revision: 3,
      spec: { model: "org/llama" },
      applied_at: T0 + 2_000,
      cause: "revert",
      from_revision: 1,
      outcome: "rolling_out",
      reason: null,
    },
  ],
};

/** A fake admin API: answers by method and path, records the calls. */
function fakeApi() {
  const calls: [string, string, unknown][] = [];
  const call = (method: string, path: string, body?: unknown) => {
    calls.push([method, path, body]);
    if (method === "GET" && path === "/v1/deployments/llama/rollout") {
      return Promise.resolve(STATUS);
    }
    if (method === "GET" && path === "/v1/deployments/llama/revisions") {
      return Promise.resolve(REVISIONS);
    }
    if (method === "POST" && path === "/v1/deployments/llama/rollout/undo") {
      const to = (body as { to_revision?: number }).to_revision ?? 2;
      return Promise.resolve({ deployment: "llama", revision: 4, from_revision: to });
    }
    return Promise.reject(new Error(`unexpected ${method} ${path}`));
  };
  return { calls, call };
}

async function run(args: string[]): Promise<{ code: number; text: string; calls: unknown[] }> {
  const api = fakeApi();
  let text = "";
  const code = await rolloutCommand(api.call, args, (t) => text += t);
  return { code, text, calls: api.calls };
}

Deno.test("rollout status --watch=false: the step, its deadline, replicas by revision", async () => {
  const { code, text } = await run(["status", "llama", "--watch=false"]);
  assertEquals(code, 0);
  assertEquals(
    text,
    [
      "deployment llama: rolling out revision 3 (back to revision 2 if it fails)",
      "step 1: replacing llama-r0 by llama-r0-v3, started first; deadline 2026-12-01T16:10:00Z",
      "ready 2/2, on revision 3: 1/2",
      "",
      "REVISION  REPLICAS  READY",
      "2         2         2",
      "3         1         0",
      "",
      "REPLICA      REVISION  STATE",
      "llama-r0     2         ready",
      "llama-r0-v3  3         loading",
      "llama-r1     2         ready",
      "",
    ].join("\n"),
  );
  const json = await run(["status", "llama", "--json", "--watch=false"]);
  assertEquals(JSON.parse(json.text), STATUS);
});

Deno.test("rollout history: one line per revision, the current marked, reasons on one line", async () => {
  const { text } = await run(["history", "llama"]);
  const lines = text.trimEnd().split("\n");
  assertEquals(lines.length, 4);
  assertEquals(lines[0].split(/\s{2,}/), [
    "REVISION",
    "APPLIED",
    "CAUSE",
    "OUTCOME",
    "MODEL",
    "REASON",
  ]);
  assertStringIncludes(lines[2], "failed");
  assertStringIncludes(lines[2], "unrecognized arguments: --max-model-lenn");
  assertEquals(lines[3].split(/\s{2,}/), [
    "3*",
    "2026-12-01T16:00:02Z",
    "revert to 1",
    "rolling_out",
    "org/llama",
  ]);
  assertEquals(JSON.parse((await run(["history", "llama", "--json"])).text), REVISIONS);
});

Deno.test("rollout undo: to the previous revision, or the one named", async () => {
  const plain = await run(["undo", "llama"]);
  assertEquals(plain.calls, [["POST", "/v1/deployments/llama/rollout/undo", {}]]);
  assertEquals(plain.text, "deployment llama: revision 2's spec is rolling out as revision 4\n");
  const named = await run(["undo", "llama", "--to-revision", "1", "--json"]);
  assertEquals(named.calls, [["POST", "/v1/deployments/llama/rollout/undo", { to_revision: 1 }]]);
  assertEquals(JSON.parse(named.text), { deployment: "llama", revision: 4, from_revision: 1 });
});

Deno.test("rollout --help and each subcommand's --help print help and call nothing", async () => {
  const top = await run(["--help"]);
  assertEquals([top.code, top.text, top.calls], [0, ROLLOUT_USAGE, []]);
  for (const sub of ["status", "history", "undo"]) {
    const { code, text, calls } = await run([sub, "-h"]);
    assertEquals([code, calls], [0, []]);
    assertStringIncludes(text, `Usage: llmgw rollout ${sub} DEPLOYMENT`);
  }
});

Deno.test("rollout usage errors: one line naming what is wrong and the fix", async () => {
  const cases: [string[], string][] = [
    [[], "rollout: name a subcommand: status, history or undo (llmgw rollout --help)"],
    [["restart", "llama"], 'rollout: unknown subcommand "restart"; use status, history or undo'],
    [["status"], "rollout status: name a deployment, e.g. llmgw rollout status llama-8b"],
    [["history", "a", "b"], 'rollout history: unexpected argument "b"; name one deployment'],
    [
      ["status", "llama", "--to-revision", "2"],
      "rollout status: --to-revision is for rollout undo; leave it out",
    ],
    [
      ["undo", "llama", "--to-revision", "two"],
      'rollout undo: --to-revision "two": expected a revision number such as 2 ' +
      "(see llmgw rollout history)",
    ],
    [["undo", "llama", "--to-revision", "0"], 'rollout undo: --to-revision "0"'],
    [["undo", "llama", "--to-revision"], "rollout: --to-revision needs a value"],
    [["status", "llama", "--follow"], "rollout: unknown flag --follow"],
    [
      ["status", "llama", "--watch=maybe"],
      'rollout status: --watch must be true or false, got "maybe"',
    ],
    [["status", "llama", "--timeout", "soon"], "rollout status: --timeout must be a duration"],
    [["history", "llama", "--watch=false"], "rollout history: --watch is for rollout status"],
  ];
  for (const [args, message] of cases) {
    const e = await assertRejects(() => run(args), UsageError);
    assertStringIncludes(e.message, message, args.join(" "));
    assertEquals(e.message.includes("\n"), false, args.join(" "));
  }
});

/** A fake admin API whose rollout status moves through `steps`, one per read (the last repeats). */
function scripted(steps: unknown[], revisions: unknown[] = []) {
  let reads = 0;
  const call = (method: string, path: string) => {
    if (method === "GET" && path === "/v1/deployments/llama/rollout") {
      return Promise.resolve(steps[Math.min(reads++, steps.length - 1)]);
    }
    if (method === "GET" && path === "/v1/deployments/llama/revisions") {
      return Promise.resolve({ deployment: "llama", revision: 4, revisions });
    }
    return Promise.reject(new Error(`unexpected ${method} ${path}`));
  };
  return { call, reads: () => reads };
}

async function watch(steps: unknown[], revisions: unknown[] = [], args: string[] = []) {
  const api = scripted(steps, revisions);
  let text = "";
  let err = "";
  const code = await rolloutCommand(api.call, ["status", "llama", ...args], (t) => text += t, {
    err: (t) => err += t,
    wait: { intervalMs: 1 },
  });
  return { code, text, err, reads: api.reads() };
}

const DONE = {
  ...STATUS,
  state: "complete",
  ready: 2,
  updated: 2,
  replicas_by_revision: [{ revision: 3, replicas: 2, ready: 2 }],
  rollout: null,
  replicas: [
    { id: "llama-r0-v3", index: 0, revision: 3, state: "ready" },
    { id: "llama-r1-v3", index: 1, revision: 3, state: "ready" },
  ],
};

Deno.test("rollout status waits until every replica runs the revision and is ready", async () => {
  const { code, text, err, reads } = await watch([STATUS, STATUS, DONE]);
  assertEquals([code, err, reads], [0, "", 3]);
  assertEquals(text.trimEnd().split("\n"), [
    "deployment llama: waiting for revision 3: 1/2 updated, 2/2 ready; replacing llama-r0 by llama-r0-v3",
    "deployment llama successfully rolled out (revision 3, 2/2 ready)",
  ]);
  // --json: the final status only.
  const json = await watch([STATUS, DONE], [], ["--json"]);
  assertEquals([json.code, JSON.parse(json.text)], [0, DONE]);
});

Deno.test("rollout status fails when the revision failed and is reverted, or its replicas stay failed", async () => {
  const reverted = {
    ...STATUS,
    revision: 4,
    rollout: { ...STATUS.rollout, target: 4, fallback: null, deadline_at: null, step: null },
  };
  const failedRevision = [{
    ...REVISIONS.revisions[2],
    outcome: "failed",
    reason: "replica llama-r0-v3 missed the progress deadline",
  }];
  const r = await watch([STATUS, reverted], failedRevision);
  assertEquals(r.code, 1);
  assertStringIncludes(
    r.err,
    "deployment llama: revision 3 failed: replica llama-r0-v3 missed the progress deadline; " +
      "revision 4 brings the previous spec back",
  );
  const failing = {
    ...DONE,
    ready: 1,
    replicas: [DONE.replicas[0], { ...DONE.replicas[1], state: "failed" }],
  };
  const stuck = await watch([failing]);
  assertEquals([stuck.code, stuck.reads], [1, 3]);
  assertStringIncludes(
    stuck.err,
    "llama-r1-v3 of revision 3 failed (llmgw describe replica llama-r1-v3)",
  );
});

Deno.test("rollout status --timeout: exits 1 when the limit passes first", async () => {
  const r = await watch([STATUS], [], ["--timeout", "50ms"]);
  assertEquals(r.code, 1);
  assertStringIncludes(
    r.err,
    "deployment llama not rolled out when --timeout ran out: 1/2 updated",
  );
});

Deno.test("rollout status: a pre-pull says which nodes hold the new model revision and until when it waits", () => {
  const text = statusText(
    {
      ...STATUS,
      state: "progressing",
      rollout: { ...STATUS.rollout, step: null },
      prepull: {
        model: "org/llama",
        commit: "2222222222222222222222222222222222222222",
        nodes: ["n1", "n2", "n3", "n4"],
        held: ["n2"],
        failed: ["n3"],
        cancelled: ["n4"],
        until: T0 + 600_000,
      },
    } as Parameters<typeof statusText>[0],
  );
  assertStringIncludes(
    text,
    "pre-pulling org/llama@2222222 before any replica stops: 1/4 nodes hold it (n1 fetching, n2 held, n3 failed, n4 cancelled)",
  );
  assertEquals(text.includes("step 1:"), false);
});
