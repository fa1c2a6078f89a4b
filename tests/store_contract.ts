/**
 * The {@link ControlStore} contract as tests (design §11, §15): every store
 * (MemoryStore, SqliteStore, PostgresStore) runs the same suite,
 * so code tested against the in-memory store behaves the same on disk. The
 * records it stores come from tests/store_records.ts.
 *
 * @module
 */
import { assertEquals, assertOk } from "./assert.ts";
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type EventRecord,
  MAX_EVENTS,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
} from "../control/store/store.ts";
import type { ModelPull } from "../control/model_pull_record.ts";
import {
  accessToken,
  apiKey,
  event,
  modelPull,
  storedDeployment,
  storedNode,
  storedReplica,
} from "./store_records.ts";

/** A store under test and how to dispose of it (close it, remove its files). */
export interface OpenedStore {
  /** The store, empty. */
  store: ControlStore;
  /** Releases it; called once after each test. */
  cleanup: () => Promise<void>;
}

/** One record type as the suite drives it, so each gets the same checks. */
interface Kind<T> {
  name: string;
  make: (key: string) => T;
  key: (t: T) => string;
  /** The record changed in a way a store could lose. */
  change: (t: T) => T;
  /** Mutates nested state in place, to check copies. */
  mutate: (t: T) => void;
  put: (s: ControlStore, t: T) => Promise<void>;
  list: (s: ControlStore) => Promise<T[]>;
  del: (s: ControlStore, key: string) => Promise<boolean>;
}

// deno-lint-ignore no-explicit-any
const KINDS: Kind<any>[] = [
  {
    name: "deployment",
    make: (k: string) => storedDeployment(k),
    key: (d: StoredDeployment) => d.name,
    change: (d: StoredDeployment) => ({
      ...d,
      spec: { ...d.spec, replicas: 5, placement: "spread" },
      updated_at: d.updated_at + 1,
      revision: 2,
      history: [
        {
          revision: 1,
          spec: d.spec,
          applied_at: d.created_at,
          cause: "apply",
          from_revision: null,
          outcome: "superseded",
          reason: null,
        },
        {
          revision: 2,
          spec: { ...d.spec, replicas: 5, placement: "spread" },
          applied_at: d.updated_at + 1,
          cause: "undo",
          from_revision: 1,
          outcome: "rolling_out",
          reason: null,
          model_commit: "0123456789abcdef0123456789abcdef01234567",
        },
      ],
      model_commit: "0123456789abcdef0123456789abcdef01234567",
      rollout: {
        target: 2,
        fallback: 1,
        started_at: d.updated_at + 1,
        progress_at: d.updated_at + 2,
        steps: 1,
        step: { replaced: "llama-r1", by: "llama-r1-v2", mode: "surge", started_at: d.updated_at },
      },
    }),
    mutate: (d: StoredDeployment) => {
      d.spec.profiles[0].engine_args.push("--mutated");
      d.spec.replicas = 99;
    },
    put: (s, d: StoredDeployment) => s.putDeployment(d),
    list: (s) => s.listDeployments(),
    del: (s, k) => s.deleteDeployment(k),
  } satisfies Kind<StoredDeployment>,
  {
    name: "replica",
    make: (k: string) => storedReplica(k),
    key: (r: StoredReplica) => r.id,
    change: (r: StoredReplica) => ({
      ...r,
      phase: "failed",
      placement: null,
      explanation: { summary: "node lost", profiles: [] },
      revision: 4,
      failure: {
        reason: "unrecognized arguments: --max-model-lenn",
        shard_id: `${r.id}/0`,
        node: "node-1",
        log_tail: ["usage: vllm serve", "error: unrecognized arguments: --max-model-lenn"],
        at: r.updated_at + 1,
        attempts: 3,
      },
      updated_at: r.updated_at + 1,
    }),
    mutate: (r: StoredReplica) => {
      r.placement!.shards[0].gpu_indices.push(7);
      r.phase = "failed";
    },
    put: (s, r: StoredReplica) => s.putReplica(r),
    list: (s) => s.listReplicas(),
    del: (s, k) => s.deleteReplica(k),
  } satisfies Kind<StoredReplica>,
  {
    name: "node",
    make: (k: string) => storedNode(k),
    key: (n: StoredNode) => n.id,
    change: (n: StoredNode) => ({
      ...n,
      intent: "draining",
      label_overrides: {},
      fabric_overrides: {},
      generation: n.generation + 1,
      last_seen_at: null,
    }),
    mutate: (n: StoredNode) => {
      n.registration.labels.mutated = "yes";
      n.label_overrides.zone = "b";
    },
    put: (s, n: StoredNode) => s.putNode(n),
    list: (s) => s.listNodes(),
    del: (s, k) => s.deleteNode(k),
  } satisfies Kind<StoredNode>,
  {
    name: "API key",
    make: (k: string) => apiKey(k),
    key: (a: ApiKeyRecord) => a.id,
    change: (a: ApiKeyRecord) => ({ ...a, name: "renamed", models: null }),
    mutate: (a: ApiKeyRecord) => {
      a.models!.push("mutated");
    },
    put: (s, a: ApiKeyRecord) => s.putApiKey(a),
    list: (s) => s.listApiKeys(),
    del: (s, k) => s.deleteApiKey(k),
  } satisfies Kind<ApiKeyRecord>,
  {
    name: "model pull",
    make: (k: string) => modelPull(k),
    key: (p: ModelPull) => p.id,
    change: (p: ModelPull) => ({
      ...p,
      nodes: p.nodes.map((n, i) =>
        i === 0
          ? {
            ...n,
            state: "cancelled" as const,
            finished_at: 1_700_000_120_000,
            reason: "node removed",
          }
          // A failure's kind round-trips beside its words (issue #25 item 8).
          : {
            ...n,
            state: "failed" as const,
            finished_at: 1_700_000_120_000,
            reason: "model acme/x revision v9 not found on https://hub.example",
            kind: "revision_not_found",
          }
      ),
      updated_at: 1_700_000_120_000,
      finished_at: 1_700_000_120_000,
    }),
    mutate: (p: ModelPull) => {
      p.nodes[0].state = "cancelled";
      p.nodes.push({ ...p.nodes[0], node: "n9" });
    },
    put: (s, p: ModelPull) => s.putModelPull(p),
    list: (s) => s.listModelPulls(),
    del: (s, k) => s.deleteModelPull(k),
  } satisfies Kind<ModelPull>,
  {
    name: "access token",
    make: (k: string) => accessToken(k),
    key: (t: AccessTokenRecord) => t.id,
    change: (t: AccessTokenRecord) => ({
      ...t,
      kind: "metrics",
      description: "changed",
      expires_at: 1_800_000_000_000,
    }),
    mutate: (t: AccessTokenRecord) => {
      t.description = "mutated";
    },
    put: (s, t: AccessTokenRecord) => s.putToken(t),
    list: (s) => s.listTokens(),
    del: (s, k) => s.deleteToken(k),
  } satisfies Kind<AccessTokenRecord>,
];

/**
 * Registers the contract's tests for one store implementation. `open` gives
 * a fresh, empty store per test; its `cleanup` runs even when a test fails.
 */
export function storeContract(name: string, open: () => Promise<OpenedStore>): void {
  for (const c of contractCases()) {
    Deno.test(`${name}: ${c.title}`, () => runCase(c, open));
  }
}

/**
 * The contract as steps of one test, for a store whose server the test
 * starts and stops around them (PostgreSQL).
 */
export async function storeContractSteps(
  t: Deno.TestContext,
  open: () => Promise<OpenedStore>,
): Promise<void> {
  for (const c of contractCases()) await t.step(c.title, () => runCase(c, open));
}

/** One case of the contract. */
interface ContractCase {
  title: string;
  fn: (store: ControlStore) => Promise<void>;
}

/** Runs a case on a fresh store; the store is cleaned up even when the case fails. */
async function runCase(c: ContractCase, open: () => Promise<OpenedStore>): Promise<void> {
  const { store, cleanup } = await open();
  try {
    await c.fn(store);
  } finally {
    await cleanup();
  }
}

/** Every case of the contract. */
function contractCases(): ContractCase[] {
  const cases: ContractCase[] = [];
  const test = (title: string, fn: (store: ControlStore) => Promise<void>) =>
    cases.push({ title, fn });

  test("a new store is empty", async (s) => {
    assertEquals(await s.listDeployments(), []);
    assertEquals(await s.listReplicas(), []);
    assertEquals(await s.listNodes(), []);
    assertEquals(await s.listApiKeys(), []);
    assertEquals(await s.listTokens(), []);
    assertEquals(await s.listModelPulls(), []);
    assertEquals(await s.listEvents(), []);
  });

  for (const kind of KINDS) {
    test(`${kind.name}: put then list round-trips every field`, async (s) => {
      const a = kind.make("a-1");
      await kind.put(s, a);
      assertEquals(await kind.list(s), [kind.make("a-1")]);
    });

    test(`${kind.name}: put with an existing key replaces the record`, async (s) => {
      const a = kind.make("a-1");
      await kind.put(s, a);
      await kind.put(s, kind.make("b-1"));
      const changed = kind.change(kind.make("a-1"));
      await kind.put(s, changed);
      assertEquals(await kind.list(s), [changed, kind.make("b-1")]);
    });

    test(`${kind.name}: delete removes the record; false when missing`, async (s) => {
      await kind.put(s, kind.make("a-1"));
      await kind.put(s, kind.make("a-2"));
      assertEquals(await kind.del(s, "a-1"), true);
      assertEquals((await kind.list(s)).map(kind.key), ["a-2"]);
      assertEquals(await kind.del(s, "a-1"), false);
      assertEquals(await kind.del(s, "never-was"), false);
      assertEquals(await kind.del(s, "a-2"), true);
      assertEquals(await kind.list(s), []);
    });

    test(`${kind.name}: listed in natural key order (r2 before r10)`, async (s) => {
      for (const k of ["r10", "r2", "r1", "b", "r100", "a-10", "a-9"]) {
        await kind.put(s, kind.make(k));
      }
      assertEquals(
        (await kind.list(s)).map(kind.key),
        ["a-9", "a-10", "b", "r1", "r2", "r10", "r100"],
      );
    });

    test(`${kind.name}: put and list hand out copies`, async (s) => {
      const a = kind.make("a-1");
      await kind.put(s, a);
      kind.mutate(a); // the caller's object after put
      const [listed] = await kind.list(s);
      assertEquals(listed, kind.make("a-1"));
      kind.mutate(listed); // an object the store handed out
      assertEquals(await kind.list(s), [kind.make("a-1")]);
    });
  }

  test("records without revision fields (written before revisions) read as revision 1", async (s) => {
    const { revision: _d, history: _h, rollout: _r, ...oldDeployment } = storedDeployment("old");
    const { revision: _v, ...oldReplica } = storedReplica("old-r0", "old");
    await s.putDeployment(oldDeployment);
    await s.putReplica(oldReplica);
    assertEquals(await s.listDeployments(), [storedDeployment("old")]);
    assertEquals(await s.listReplicas(), [storedReplica("old-r0", "old")]);
  });

  test("records without a model commit (written before issue #25) read with model_commit null", async (s) => {
    const { model_commit: _c, ...oldDeployment } = storedDeployment("old");
    await s.putDeployment(oldDeployment);
    assertEquals(await s.listDeployments(), [storedDeployment("old")]);
    await s.putDeployment({ ...oldDeployment, model_commit: "f".repeat(40) });
    assertEquals((await s.listDeployments())[0].model_commit, "f".repeat(40));
  });

  test('records without identities (written before them) read with uid ""', async (s) => {
    const { uid: _d, ...oldDeployment } = storedDeployment("old");
    const { uid: _r, ...oldReplica } = storedReplica("old-r0", "old");
    await s.putDeployment(oldDeployment);
    await s.putReplica(oldReplica);
    assertEquals(await s.listDeployments(), [{ ...storedDeployment("old"), uid: "" }]);
    assertEquals(await s.listReplicas(), [{ ...storedReplica("old-r0", "old"), uid: "" }]);
  });

  test("events: the incarnation (uid) round-trips and filters, with or without a subject", async (s) => {
    const first = await s.addEvent(event("deployment/a", 1, "u1"));
    const second = await s.addEvent(event("deployment/a", 2, "u2"));
    const legacy = await s.addEvent(event("deployment/a", 3, ""));
    await s.addEvents?.([event("deployment/a", 4, "u2"), event("node/n1", 5, "")]);
    const listed = await s.listEvents();
    assertEquals(listed.slice(0, 3), [first, second, legacy]);
    assertEquals(listed.map((e) => e.uid), ["u1", "u2", "", ...(s.addEvents ? ["u2", ""] : [])]);
    assertEquals(await s.listEvents({ subject: "deployment/a", uid: "u1" }), [first]);
    assertEquals(
      (await s.listEvents({ subject: "deployment/a", uid: "u2" })).map((e) => e.at),
      s.addEvents ? [2, 4] : [2],
    );
    assertEquals(await s.listEvents({ subject: "deployment/a", uid: "" }), [legacy]);
    assertEquals(await s.listEvents({ uid: "u1" }), [first]);
    assertEquals(await s.listEvents({ subject: "deployment/b", uid: "u1" }), []);
  });

  test("nodes' last-seen times: written in a batch, nothing else touched, unknown ids skipped", async (s) => {
    const { last_seen_at: _l, ...older } = storedNode("n1");
    await s.putNode(older);
    await s.putNode(storedNode("n2"));
    assertEquals((await s.listNodes()).map((n) => n.last_seen_at), [null, 1_699_999_995_000]);
    await s.recordNodesSeen([
      { id: "n1", last_seen_at: 1_700_000_060_000 },
      { id: "n2", last_seen_at: 1_700_000_061_000 },
      { id: "gone", last_seen_at: 1_700_000_062_000 },
    ]);
    await s.recordNodesSeen([]);
    assertEquals(await s.listNodes(), [
      { ...storedNode("n1"), last_seen_at: 1_700_000_060_000 },
      { ...storedNode("n2"), last_seen_at: 1_700_000_061_000 },
    ]);
  });

  test("a placement's ready time round-trips, and its absence too", async (s) => {
    const r = storedReplica("llama-r0");
    r.placement!.ready_at = 1_700_000_000_123;
    await s.putReplica(r);
    await s.putReplica(storedReplica("llama-r1"));
    const [ready, notYet] = await s.listReplicas();
    assertEquals(ready.placement?.ready_at, 1_700_000_000_123);
    assertEquals(notYet.placement?.ready_at, undefined);
  });

  test("events: ids increase and list oldest first", async (s) => {
    const added: EventRecord[] = [];
    for (let i = 0; i < 5; i++) added.push(await s.addEvent(event(`replica/r${i}`, 1000 + i)));
    for (let i = 1; i < added.length; i++) assertOk(added[i].id > added[i - 1].id);
    assertEquals(added[0], { id: added[0].id, ...event("replica/r0", 1000) });
    assertEquals(await s.listEvents(), added);
  });

  test("events: after, subject and limit filter", async (s) => {
    const added: EventRecord[] = [];
    for (let i = 0; i < 150; i++) {
      const subject = i % 3 === 0 ? "deployment/a" : i % 3 === 1 ? "deployment/ab" : "node/n1";
      added.push(await s.addEvent(event(subject, i)));
    }
    // Default limit: the newest 100, oldest first.
    assertEquals(await s.listEvents(), added.slice(-100));
    assertEquals(await s.listEvents({ limit: 3 }), added.slice(-3));
    assertEquals(await s.listEvents({ limit: 1000 }), added);
    // after: strictly larger ids.
    assertEquals(await s.listEvents({ after: added[146].id }), added.slice(147));
    assertEquals(await s.listEvents({ after: added[149].id }), []);
    // subject: exact, so deployment/a does not match deployment/ab.
    const aOnly = added.filter((e) => e.subject === "deployment/a");
    assertEquals(await s.listEvents({ subject: "deployment/a" }), aOnly);
    assertEquals(await s.listEvents({ subject: "deployment" }), []);
    // All three together: newest 2 of those after, about the subject.
    assertEquals(
      await s.listEvents({ subject: "deployment/a", after: added[10].id, limit: 2 }),
      aOnly.slice(-2),
    );
    assertEquals(
      await s.listEvents({ subject: "node/n1", after: added[140].id, limit: 100 }),
      added.slice(141).filter((e) => e.subject === "node/n1"),
    );
  });

  test("events: added and listed events are copies", async (s) => {
    const input = event("node/n1");
    const added = await s.addEvent(input);
    input.message = "changed by caller";
    added.message = "changed by caller";
    const [listed] = await s.listEvents();
    assertEquals(listed, { id: added.id, ...event("node/n1") });
    listed.message = "changed by caller";
    assertEquals((await s.listEvents())[0].message, event("node/n1").message);
  });

  test(`events: only the newest MAX_EVENTS (${MAX_EVENTS}) are kept`, async (s) => {
    const extra = 50;
    const total = MAX_EVENTS + extra;
    const first = await s.addEvent(event("replica/r0", 0));
    let last = first;
    // A store that takes batches gets all but the first and the last ten in
    // batches (10,000 round trips to PostgreSQL take seconds): the batches
    // already pass MAX_EVENTS, and each single add after them prunes too.
    let i = 1;
    if (s.addEvents !== undefined) {
      while (i < total - 10) {
        const n = Math.min(1_000, total - 10 - i);
        await s.addEvents(
          Array.from({ length: n }, (_, k) => event(`replica/r${(i + k) % 7}`, i + k)),
        );
        i += n;
      }
    }
    for (; i < total; i++) last = await s.addEvent(event(`replica/r${i % 7}`, i));
    const kept = await s.listEvents({ limit: MAX_EVENTS * 2 });
    assertEquals(kept.length, MAX_EVENTS);
    assertEquals(kept[0].id, first.id + extra);
    assertEquals(kept[0].at, extra);
    assertEquals(kept.at(-1), last);
    // Pruned ids are not handed out again.
    const next = await s.addEvent(event("node/n1"));
    assertEquals(next.id, last.id + 1);
    assertEquals((await s.listEvents({ limit: MAX_EVENTS * 2 })).length, MAX_EVENTS);
  });

  test("events: a batch, where the store takes one, lands in order after single ones", async (s) => {
    if (s.addEvents === undefined) return;
    const one = await s.addEvent(event("node/n0", 1));
    await s.addEvents([event("node/n1", 2), event("node/n2", 3), event("node/n3", 4)]);
    await s.addEvents([]);
    const listed = await s.listEvents();
    assertEquals(listed.map((e) => e.subject), ["node/n0", "node/n1", "node/n2", "node/n3"]);
    assertEquals(listed[0], one);
    for (let i = 1; i < listed.length; i++) assertOk(listed[i].id > listed[i - 1].id);
    assertEquals(listed[3], { id: listed[3].id, ...event("node/n3", 4) });
  });

  test("record types are independent of each other", async (s) => {
    // The same key in every table, and a replica whose deployment is not stored.
    await s.putDeployment(storedDeployment("x"));
    await s.putReplica(storedReplica("x", "no-such-deployment"));
    await s.putNode(storedNode("x"));
    await s.putApiKey(apiKey("x", null));
    assertEquals(await s.deleteDeployment("x"), true);
    assertEquals(await s.listReplicas(), [storedReplica("x", "no-such-deployment")]);
    assertEquals(await s.listNodes(), [storedNode("x")]);
    assertEquals(await s.listApiKeys(), [apiKey("x", null)]);
  });
  return cases;
}
