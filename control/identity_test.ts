import { assertEquals, assertOk } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { currentUid, incarnationFilter } from "./identity.ts";

const BOOKS = {
  deployments: new Map([["a", { uid: "da" }], ["old", {}]]),
  replicas: new Map([["a-r0", { uid: "ra" }]]),
};

Deno.test("currentUid: deployments and replicas by name; none for other subjects or gone ones", () => {
  const cases: [string, string | undefined][] = [
    ["deployment/a", "da"],
    ["deployment/old", ""],
    ["deployment/gone", undefined],
    ["replica/a-r0", "ra"],
    ["replica/a", undefined],
    ["node/a", undefined],
    ["token/a", undefined],
    ["a", undefined],
  ];
  for (const [subject, want] of cases) assertEquals(currentUid(BOOKS, subject), want, subject);
});

Deno.test("incarnationFilter: current by default with a subject, all, or one uid", () => {
  const cases: [string | undefined, string | undefined, string | undefined][] = [
    ["deployment/a", undefined, "da"],
    ["deployment/a", "current", "da"],
    ["deployment/a", "all", undefined],
    ["deployment/a", "u-older", "u-older"],
    ["deployment/gone", undefined, undefined],
    ["node/n1", undefined, undefined],
    [undefined, undefined, undefined],
    [undefined, "current", undefined],
    [undefined, "u-older", "u-older"],
  ];
  for (const [subject, incarnation, want] of cases) {
    assertEquals(incarnationFilter(BOOKS, subject, incarnation), want, `${subject} ${incarnation}`);
  }
});

Deno.test("a deployment created again under its old name shows only its own events", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const first = cp.replicas()[0];
  await cp.deployments.delete(QWEN.name);
  await cp.reconcile();
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const second = cp.replicas()[0];
  assertEquals(second.id, first.id);

  const kinds = async (subject: string, incarnation?: string) =>
    (await cp.events.list({ subject, incarnation, limit: 1000 })).map((e) => e.kind);
  assertEquals(await kinds("deployment/qwen"), ["deployment_created"]);
  assertEquals(await kinds("deployment/qwen", "all"), [
    "deployment_created",
    "deployment_deleted",
    "deployment_created",
  ]);
  // The replica of the same id is another replica: its predecessor's removal is not its history.
  assertEquals(await kinds(`replica/${second.id}`), ["replica_placed"]);
  assertEquals(await kinds(`replica/${second.id}`, "all"), [
    "replica_placed",
    "replica_removed",
    "replica_placed",
  ]);
  // Older incarnations stay queryable by their uid, which every event carries.
  const all = await cp.events.list({ subject: "deployment/qwen", incarnation: "all" });
  assertOk(all[0].uid !== all[2].uid && all[2].uid !== "");
  assertEquals(all[1].uid, all[0].uid);
  assertEquals(
    (await cp.events.list({ subject: "deployment/qwen", incarnation: all[0].uid }))
      .map((e) => e.kind),
    ["deployment_created", "deployment_deleted"],
  );
  // Without a subject, the log is every event.
  assertEquals((await cp.events.list({ limit: 1000 })).length >= 6, true);
});
