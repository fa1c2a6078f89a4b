import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { decodeDocuments } from "../cli/apply_sources.ts";
import { sameWorkload } from "../control/rollout_revisions.ts";
import { canonicalSpec, specChanges, withSettingsOf } from "./canonical.ts";
import { parseDeployment, parseDeploymentText } from "./load.ts";
import type { Deployment } from "./schema.ts";

const EXAMPLE = new URL("../dev/samples/llama-8b.yaml", import.meta.url);

Deno.test("specChanges: the dev example read by `llmgw dev` and sent by `llmgw apply` is the same spec", async () => {
  const text = await Deno.readTextFile(EXAMPLE);
  // `llmgw dev` applies the spec it parsed; the control plane parses it again,
  // and `gpus_per_node` (a default filled in by the first parse) moves.
  const stored = parseDeployment(parseDeploymentText(text, "llama-8b.yaml").deployment, "body")
    .deployment;
  const sent = parseDeployment(decodeDocuments(text, "llama-8b.yaml")[0].doc, "body").deployment;
  assertOk(JSON.stringify(stored) !== JSON.stringify(sent), "the key orders differ");
  assertEquals(specChanges(stored, sent), []);
  assertOk(sameWorkload(stored, sent));
});

Deno.test("specChanges: each changed field with its path, old and new value, and whether it rolls (table)", () => {
  const base = parseDeploymentText(Deno.readTextFileSync(EXAMPLE), "x.yaml").deployment;
  const p0 = base.profiles[0];
  const cases: [string, Partial<Deployment>, unknown[]][] = [
    ["count", { replicas: 5 }, [{ path: "replicas", from: 3, to: 5, rolls: false }]],
    ["routing written as its default", { routing: "prefix_affinity" }, []],
    [
      "rollout deadline written as its default",
      { rollout: { progress_deadline_seconds: 600 } },
      [],
    ],
    ["empty rollout settings", { rollout: {} }, []],
    ["routing", { routing: "random" }, [{
      path: "routing",
      from: "prefix_affinity",
      to: "random",
      rolls: false,
    }]],
    ["engine args", { profiles: [{ ...p0, engine_args: ["--x"] }, base.profiles[1]] }, [{
      path: "profiles[0].engine_args",
      from: [],
      to: ["--x"],
      rolls: true,
    }]],
    ["env added", { profiles: [{ ...p0, env: { A: "1" } }, base.profiles[1]] }, [{
      path: "profiles[0].env.A",
      to: "1",
      rolls: true,
    }]],
    ["model revision written as its default", { revision: "main" }, []],
    ["pinned written as its default", { pinned: false }, []],
    ["model revision", { revision: "v2" }, [{
      path: "revision",
      from: "main",
      to: "v2",
      rolls: true,
    }]],
    ["pinned: kept from eviction, nothing restarts", { pinned: true }, [{
      path: "pinned",
      from: false,
      to: true,
      rolls: false,
    }]],
    ["profile dropped", { profiles: [p0] }, [{
      path: "profiles[1]",
      from: base.profiles[1],
      rolls: true,
    }]],
  ];
  for (const [title, change, want] of cases) {
    const next = parseDeployment({ ...base, ...change }, "body").deployment;
    assertEquals(specChanges(base, next), want, title);
  }
});

Deno.test("canonicalSpec: a spec stored before revisions and pins reads as revision main, unpinned", () => {
  const base = parseDeploymentText(Deno.readTextFileSync(EXAMPLE), "x.yaml").deployment;
  const { revision: _r, pinned: _p, ...old } = base;
  assertEquals(specChanges(old as Deployment, base), []);
  const local = { ...base, model: "/models/llama" };
  assertEquals(canonicalSpec(local).revision, undefined);
});

Deno.test("withSettingsOf: an older workload at today's count, routing and rollout settings", () => {
  const base = parseDeploymentText(Deno.readTextFileSync(EXAMPLE), "x.yaml").deployment;
  const old = { ...base, model: "org/old", routing: "random" as const };
  const now = { ...base, replicas: 7, pinned: true, rollout: { progress_deadline_seconds: 30 } };
  const back = withSettingsOf(old, now);
  assertEquals([back.model, back.replicas, back.routing, back.rollout, back.pinned], [
    "org/old",
    7,
    undefined,
    { progress_deadline_seconds: 30 },
    true,
  ]);
});

/** A shuffle driven by a seed, so fast-check can replay and shrink it. */
function shuffler(seed: number): <T>(xs: T[]) => T[] {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  return <T>(xs: T[]) => {
    const out = [...xs];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  };
}

/** A copy with every object's keys in a random order. */
function reorder(x: unknown, shuffle: <T>(xs: T[]) => T[]): unknown {
  if (Array.isArray(x)) return x.map((v) => reorder(v, shuffle));
  if (typeof x !== "object" || x === null) return x;
  return Object.fromEntries(
    shuffle(Object.entries(x)).map(([k, v]) => [k, reorder(v, shuffle)]),
  );
}

/** Each default either written out or left to the schema, as `explicit` says. */
function document(
  spec: {
    name: string;
    replicas: number;
    profiles: { engine: string; tp: number; args: string[]; env: Record<string, string> }[];
  },
  explicit: boolean[],
): Record<string, unknown> {
  let i = 0;
  const maybe = (key: string, value: unknown) =>
    explicit[i++ % explicit.length] ? { [key]: value } : {};
  return {
    name: spec.name,
    model: "org/model",
    replicas: spec.replicas,
    ...maybe("served_model_name", spec.name),
    ...maybe("placement", "pack"),
    ...maybe("routing", "prefix_affinity"),
    ...maybe("rollout", { progress_deadline_seconds: 600 }),
    profiles: spec.profiles.map((p, n) => ({
      name: `p${n}`,
      engine: p.engine,
      gpu_class: "h100-80g",
      tensor_parallel: p.tp,
      ...maybe("pipeline_parallel", 1),
      ...maybe("nodes", 1),
      ...maybe("gpus_per_node", p.tp),
      ...maybe("quantization", "none"),
      ...(p.args.length > 0 ? { engine_args: p.args } : maybe("engine_args", [])),
      ...(Object.keys(p.env).length > 0 ? { env: p.env } : maybe("env", {})),
      ...maybe("engine_options", {}),
      ...maybe("node_selector", {}),
    })),
  };
}

const specs = fc.record({
  name: fc.constantFrom("llama-8b", "qwen", "m"),
  replicas: fc.integer({ min: 0, max: 8 }),
  profiles: fc.array(
    fc.record({
      engine: fc.constantFrom("vllm", "sglang"),
      tp: fc.constantFrom(1, 2, 4, 8),
      args: fc.array(fc.constantFrom("--a", "--b", "1"), { maxLength: 3 }),
      env: fc.dictionary(fc.constantFrom("A", "B", "NCCL_DEBUG"), fc.constantFrom("x", "y")),
    }),
    { minLength: 1, maxLength: 3 },
  ),
});

Deno.test("specChanges (property): key order and written-out defaults never make a change", () => {
  fc.assert(
    fc.property(
      specs,
      fc.array(fc.boolean(), { minLength: 1, maxLength: 16 }),
      fc.array(fc.boolean(), { minLength: 1, maxLength: 16 }),
      fc.integer(),
      fc.integer(),
      (spec, explicitA, explicitB, seedA, seedB) => {
        const a = reorder(document(spec, explicitA), shuffler(seedA));
        const b = reorder(document(spec, explicitB), shuffler(seedB));
        const live = parseDeployment(a, "a").deployment;
        const sent = parseDeployment(b, "b").deployment;
        assertEquals(specChanges(live, sent), []);
        assertOk(sameWorkload(live, sent));
        // A spec already parsed, then parsed again by another code path with
        // its keys in any order, is the same.
        const again = parseDeployment(reorder(live, shuffler(seedB)), "again").deployment;
        assertEquals(specChanges(live, again), []);
        assertEquals(JSON.stringify(canonicalSpec(live)), JSON.stringify(canonicalSpec(sent)));
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("specChanges (property): a changed workload field always rolls; the count alone never does", () => {
  fc.assert(
    fc.property(specs, fc.integer(), fc.integer({ min: 0, max: 8 }), (spec, seed, count) => {
      const live = parseDeployment(document(spec, [true]), "a").deployment;
      const changed = reorder(
        document(
          {
            ...spec,
            profiles: spec.profiles.map((p, i) =>
              i === 0 ? { ...p, args: [...p.args, "--changed"] } : p
            ),
          },
          [false],
        ),
        shuffler(seed),
      );
      const rolled = specChanges(live, parseDeployment(changed, "b").deployment);
      assertEquals(rolled.map((c) => [c.path, c.rolls]), [["profiles[0].engine_args", true]]);
      const scaled = specChanges(
        live,
        parseDeployment(document({ ...spec, replicas: count }, [false]), "c").deployment,
      );
      assertEquals(
        scaled.map((c) => [c.path, c.rolls]),
        count === spec.replicas ? [] : [["replicas", false]],
      );
    }),
    { numRuns: 200 },
  );
});
