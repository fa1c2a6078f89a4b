/**
 * `llmgw dev` end to end: the all-in-one cluster starts, its samples load on
 * the fake engine and the official `openai` client gets answers through its
 * gateway (issue #7's last point); `--port P` moves every port it uses, so
 * two clusters run side by side, each serving only its own engines (issue
 * #13). In-process runs are stopped through the stop signal, processes with
 * SIGTERM, in a `finally`; either way every engine they started is stopped.
 */
// The official client, for tests only (not a dependency of llmgw).
// deno-lint-ignore no-import-prefix
import OpenAI from "npm:openai@^5";
import fc from "fast-check";
import { join } from "node:path";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { devCommand } from "../cli/dev_command.ts";
import {
  DEV_NODES,
  DEV_PORT_MAX,
  DEV_PORT_MIN,
  DEV_PORT_SPAN,
  type DevPorts,
  devPorts,
} from "../cli/dev_ports.ts";
import { UsageError } from "../cli/usage_error.ts";
import {
  devBases,
  devEnginePids,
  type DevEnv,
  type DevProcess,
  readDevEnv,
  spawnDev,
  stopDev,
} from "./dev_processes.ts";
import { portsOf } from "./port_plan.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { MODEL_PRESETS } from "../dev/fake_hub/model_presets.ts";

/** This file's ports (tests/port_plan.ts): room for its `llmgw dev` clusters. */
const PORTS = portsOf(import.meta.url);

/** Every port of a layout, the engines' ranges expanded. */
function allPorts(p: DevPorts): number[] {
  const out = [p.control, p.gateway, p.hub, p.hubCdn];
  for (const a of p.agents) {
    out.push(a.api, a.proxy);
    for (let port = a.engines.from; port <= a.engines.to; port++) out.push(port);
  }
  return out;
}

Deno.test("devPorts: every port of P's layout is in P…P+span-1, none twice (property)", () => {
  fc.assert(fc.property(fc.integer({ min: DEV_PORT_MIN, max: DEV_PORT_MAX }), (base) => {
    const p = devPorts(base);
    assertEquals(p.control, base);
    assertEquals(p.agents.map((a) => a.node), DEV_NODES.map(([n]) => n));
    const ports = allPorts(p);
    assertEquals(new Set(ports).size, ports.length, "no port twice");
    for (const port of ports) {
      assertOk(port >= base && port < base + DEV_PORT_SPAN && port <= 65535, `${port}`);
    }
  }));
});

Deno.test("devPorts: layouts whose bases are a span apart share no port (property)", () => {
  const pair = fc.integer({ min: DEV_PORT_MIN, max: DEV_PORT_MAX - DEV_PORT_SPAN })
    .chain((a) =>
      fc.tuple(fc.constant(a), fc.integer({ min: a + DEV_PORT_SPAN, max: DEV_PORT_MAX }))
    );
  fc.assert(fc.property(pair, ([a, b]) => {
    const mine = new Set(allPorts(devPorts(a)));
    assertOk(allPorts(devPorts(b)).every((p) => !mine.has(p)), `${a} and ${b}`);
  }));
  // The example from the issue.
  const a = new Set(allPorts(devPorts(7070)));
  assertOk(allPorts(devPorts(9070)).every((p) => !a.has(p)));
});

Deno.test("dev: the default layout keeps the control plane on 7070 and the gateway on 7080", () => {
  const p = devPorts(7070);
  assertEquals([p.control, p.gateway], [7070, 7080]);
});

Deno.test("dev: a --port out of range or not a number is a usage error, before anything starts", async () => {
  const cases: [string, string][] = [
    ["0", `--port must be a whole number from ${DEV_PORT_MIN} to ${DEV_PORT_MAX}`],
    ["1023", 'got "1023"'],
    [String(DEV_PORT_MAX + 1), `got "${DEV_PORT_MAX + 1}"`],
    ["70000", 'got "70000"'],
    ["0x1f90", 'got "0x1f90"'],
    ["7070.5", 'got "7070.5"'],
    ["", 'got ""'],
  ];
  for (const [value, message] of cases) {
    let out = "";
    await assertRejects(
      () => devCommand(["--port", value], (t) => out += t, undefined, (t) => out += t),
      UsageError,
      message,
    );
    assertEquals(out, "", `--port ${JSON.stringify(value)}: nothing printed`);
  }
});

Deno.test({
  name: "llmgw dev: the openai client gets a chat answer and a stream through the gateway",
  // The agents' engines are stopped by the dev command's own shutdown.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "llmgw-dev-test-" });
    const [base] = devBases(PORTS, 1);
    let trust: ReturnType<typeof pinnedFetch> | undefined;
    let stop!: () => void;
    const stopped = new Promise<void>((r) => stop = r);
    let output = "";
    const running = devCommand(
      ["--dir", dir, "--port", String(base), "--load-seconds", "1", "--quiet"],
      (t) => output += t,
      stopped,
      (t) => output += t,
    );
    try {
      const describe = () => `output:\n${output}`;
      const gatewayUrl = await until(
        "dev.env with the gateway URL",
        async () =>
          /LLMGW_GATEWAY_URL=(\S+)/.exec(await Deno.readTextFile(join(dir, "dev.env")))?.[1],
        { timeoutMs: 60_000, intervalMs: 200, describe },
      );
      assertEquals(gatewayUrl, `https://127.0.0.1:${devPorts(base).gateway}`);
      const env = (await readDevEnv(dir))!;
      trust = pinnedFetch(Deno.readTextFileSync(env.ca));
      // The fake engine stands in for both engines, and every simulated node
      // says so: placement keeps a profile off nodes without its engine (issue #23).
      const { nodes } = await admin<{ nodes: { engine_versions: Record<string, string> }[] }>(
        env,
        trust.fetch,
        "/v1/nodes",
      );
      assertOk(nodes.length > 0);
      for (const n of nodes) {
        assertEquals(Object.keys(n.engine_versions).sort(), ["sglang", "vllm"]);
      }
      // Dev's facts are the real models' (the synthetic indexes claim their size, issue #25
      // item 6) while their files, what the agents fetch, stay small.
      const LLAMA_405B = "meta-llama/Llama-3.1-405B-Instruct-FP8";
      const facts = await until("the 405B's facts learned", async () => {
        const { models } = await admin<{ models: { facts: DevFacts | null }[] }>(
          env,
          trust!.fetch,
          "/v1/models",
        );
        return models.map((m) => m.facts).find((f) => f?.source === LLAMA_405B) ?? undefined;
      }, { timeoutMs: 30_000, intervalMs: 250, describe });
      assertEquals(facts.weight_bytes, MODEL_PRESETS["llama-3.1-405b-instruct-fp8"].weightBytes);
      assertOk(facts.download_bytes! < 256 * 2 ** 20, `${facts.download_bytes} bytes of files`);
      // So one 45 GB L40S is refused at apply, with the numbers.
      const refused = await trust.fetch(`${env.url}/v1/deployments`, {
        method: "POST",
        headers: { authorization: `Bearer ${env.token}`, "content-type": "application/json" },
        body: JSON.stringify({
          name: "llama-405b-l40s",
          model: LLAMA_405B,
          profiles: [{
            name: "l40s-one",
            engine: "vllm",
            gpu_class: "l40s-45g",
            tensor_parallel: 1,
          }],
        }),
      });
      assertEquals(refused.status, 400);
      assertStringIncludes(
        await refused.text(),
        "insufficient_gpu_memory: needs 445.0 GiB per GPU (weights 382.0 + KV cache for one " +
          "131072-token sequence 63.0) but an l40s-45g GPU offers 40.5 GiB",
      );
      // A client that does not trust the cluster CA is refused, and so is plain HTTP.
      await assertRejects(() => fetch(`${gatewayUrl}/v1/models`), TypeError);
      await assertRejects(
        () => fetch(`${gatewayUrl.replace("https:", "http:")}/v1/models`),
        TypeError,
      );
      const client = new OpenAI({
        baseURL: `${gatewayUrl}/v1`,
        apiKey: "unused",
        maxRetries: 0,
        fetch: trust.fetch,
      });
      // The gateway lists only ready models: this waits for a llama-8b replica to load.
      await until(
        "llama-8b listed",
        async () => (await client.models.list()).data.some((m) => m.id === "llama-8b"),
        { timeoutMs: 60_000, intervalMs: 250, describe },
      );
      const answer = await client.chat.completions.create({
        model: "llama-8b",
        messages: [{ role: "user", content: "hello" }],
      });
      assertOk((answer.choices[0].message.content ?? "").length > 0);
      const stream = await client.chat.completions.create({
        model: "llama-8b",
        messages: [{ role: "user", content: "hello" }],
        stream: true,
      });
      let deltas = 0;
      for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) deltas++;
      assertOk(deltas > 1, `several deltas, got ${deltas}`);
    } finally {
      trust?.close();
      stop();
      assertEquals(await running, 0);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

/** What the control plane's model list shows of a model's facts. */
interface DevFacts {
  source: string;
  weight_bytes: number;
  download_bytes?: number;
}

interface ShardSeen {
  node: string;
  port: number;
}

interface ReplicaSeen {
  id: string;
  deployment: string;
  state: string;
  shards: ShardSeen[];
}

async function admin<T>(env: DevEnv, trust: typeof fetch, path: string): Promise<T> {
  const r = await trust(`${env.url}${path}`, {
    headers: { authorization: `Bearer ${env.token}` },
  });
  if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
  return await r.json() as T;
}

/** Tokens the fake engine on `port` generated so far, from its /metrics (vLLM or SGLang names). */
async function generatedTokens(port: number): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  const text = await r.text();
  if (!r.ok) throw new Error(`engine on ${port}: /metrics answered ${r.status}: ${text}`);
  const m = /^(?:vllm|sglang):generation_tokens_total\{[^}]*\} (\S+)$/m.exec(text);
  if (m === null) throw new Error(`engine on ${port}: no generation_tokens_total in /metrics`);
  return Number(m[1]);
}

Deno.test({
  name:
    "llmgw dev --port: two clusters on one machine both reach ready, each serving only its own engines",
  async fn() {
    const bases = devBases(PORTS, 2);
    const dirs = await Promise.all(
      bases.map((_, i) => Deno.makeTempDir({ prefix: `llmgw-dev-pair-${i}-` })),
    );
    const devs: DevProcess[] = [];
    let running: DevProcess[] = [];
    const pins: ReturnType<typeof pinnedFetch>[] = [];
    try {
      for (const [i, base] of bases.entries()) {
        devs.push(spawnDev(base, dirs[i], ["--load-seconds", "0.5"]));
      }
      running = [...devs];
      const describe = () =>
        devs.map((d, i) => `cluster ${bases[i]}: ${JSON.stringify(d.output())}`).join("\n");
      const envs = await Promise.all(
        dirs.map((dir) =>
          until("dev.env written", () => readDevEnv(dir), {
            timeoutMs: 60_000,
            intervalMs: 200,
            describe,
          })
        ),
      );
      for (const env of envs) pins.push(pinnedFetch(Deno.readTextFileSync(env.ca)));
      const layouts = bases.map(devPorts);
      for (const [i, env] of envs.entries()) {
        assertEquals(env.url, `https://127.0.0.1:${layouts[i].control}`);
        assertEquals(env.gatewayUrl, `https://127.0.0.1:${layouts[i].gateway}`);
      }
      // Both reach ready: every llama-8b and qwen-7b replica (llama-405b cannot be placed).
      const ready = await Promise.all(
        envs.map((env, i) =>
          until("every placeable sample replica ready", async () => {
            const { replicas } = await admin<{ replicas: ReplicaSeen[] }>(
              env,
              pins[i].fetch,
              "/v1/replicas",
            );
            const placeable = replicas.filter((r) => r.deployment !== "llama-405b");
            return placeable.length === 4 && placeable.every((r) => r.state === "ready") &&
              placeable;
          }, { timeoutMs: 90_000, intervalMs: 250, describe })
        ),
      );
      // Each cluster's engines listen inside its own agents' ranges, on the node that runs them.
      for (const [i, replicas] of ready.entries()) {
        for (const r of replicas) {
          for (const s of r.shards) {
            const range = layouts[i].agents.find((a) => a.node === s.node)!.engines;
            assertOk(
              s.port >= range.from && s.port <= range.to,
              `cluster ${
                bases[i]
              }: ${r.id} on ${s.node} port ${s.port} outside ${range.from}-${range.to}`,
            );
          }
        }
      }
      // Each gateway routes to its own agents' engine proxies only.
      for (const [i, env] of envs.entries()) {
        const { endpoints } = await admin<{ endpoints: { url: string }[] }>(
          env,
          pins[i].fetch,
          "/v1/endpoints",
        );
        const proxies = new Set(layouts[i].agents.map((a) => `https://127.0.0.1:${a.proxy}`));
        assertOk(endpoints.length > 0);
        for (const e of endpoints) assertOk(proxies.has(e.url), `cluster ${bases[i]}: ${e.url}`);
      }
      // A completion through each gateway is generated by that cluster's engines, never the other's.
      const llamaPorts = ready.map((replicas) =>
        replicas.filter((r) => r.deployment === "llama-8b").flatMap((r) => r.shards)
          .map((s) => s.port)
      );
      const tokens = () =>
        Promise.all(
          llamaPorts.map(async (ports) =>
            (await Promise.all(ports.map(generatedTokens))).reduce((a, b) => a + b, 0)
          ),
        );
      for (const [i, env] of envs.entries()) {
        const before = await tokens();
        const client = new OpenAI({
          baseURL: `${env.gatewayUrl}/v1`,
          apiKey: "unused",
          maxRetries: 0,
          fetch: pins[i].fetch,
        });
        // The gateway polls its control plane: wait until it lists the model too.
        await until(
          "llama-8b listed by the gateway",
          async () => (await client.models.list()).data.some((m) => m.id === "llama-8b"),
          { timeoutMs: 30_000, intervalMs: 200, describe },
        );
        const answer = await client.chat.completions.create({
          model: "llama-8b",
          messages: [{ role: "user", content: `which cluster? ${bases[i]}` }],
        });
        const generated = answer.usage?.completion_tokens ?? 0;
        assertOk(generated > 0 && (answer.choices[0].message.content ?? "") !== "");
        const after = await tokens();
        assertEquals(
          after.map((t, j) => t - before[j]),
          bases.map((_, j) => j === i ? generated : 0),
          `tokens generated per cluster by a request through cluster ${bases[i]}'s gateway`,
        );
      }
      // Both stop cleanly, and so do their engines.
      const engines = dirs.flatMap(devEnginePids);
      assertOk(engines.length >= 8, `engines running: ${engines}`);
      const stopping = running;
      running = [];
      const statuses = await Promise.all(stopping.map((d) => stopDev(d)));
      assertEquals(statuses.map((s) => s.code), [0, 0], describe());
      assertEquals(
        engines.filter((pid) => groupMembers(pid).length > 0),
        [],
        "no engine outlives its cluster",
      );
    } finally {
      for (const p of pins) p.close();
      await Promise.allSettled(running.map((d) => stopDev(d)));
      for (const dir of dirs) await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "llmgw dev: a restart on the same --dir keeps the operator's changes (samples applied once)",
  // The agents' engines are stopped by the dev command's own shutdown.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "llmgw-dev-keep-" });
    const [base] = devBases(PORTS, 1);
    const start = () => {
      let stop!: () => void;
      const stopped = new Promise<void>((r) => stop = r);
      let output = "";
      const running = devCommand(
        ["--dir", dir, "--port", String(base), "--load-seconds", "0.5", "--quiet"],
        (t) => output += t,
        stopped,
        (t) => output += t,
      );
      return { stop, running, output: () => output };
    };
    type Deployments = { deployments: { name: string; spec: { replicas: number } }[] };
    const replicasOf = async (env: DevEnv, trust: typeof fetch, name: string) =>
      (await admin<Deployments>(env, trust, "/v1/deployments")).deployments
        .find((d) => d.name === name)?.spec.replicas;
    let dev = start();
    let trust: ReturnType<typeof pinnedFetch> | undefined;
    try {
      const describe = () => `output:\n${dev.output()}`;
      await until("the samples applied", () => /applied .*llama-8b/.test(dev.output()), {
        timeoutMs: 60_000,
        intervalMs: 200,
        describe,
      });
      let env = (await readDevEnv(dir))!;
      trust = pinnedFetch(Deno.readTextFileSync(env.ca));
      const sample = (await replicasOf(env, trust.fetch, "llama-8b"))!;
      assertOk(sample > 1, `the llama-8b sample asks for more than 1 replica, got ${sample}`);
      // The operator scales a sample down and deletes another.
      const post = await trust.fetch(`${env.url}/v1/deployments/llama-8b/scale`, {
        method: "POST",
        headers: { authorization: `Bearer ${env.token}`, "content-type": "application/json" },
        body: JSON.stringify({ replicas: 1 }),
      });
      assertEquals(post.status, 200, await post.text());
      const del = await trust.fetch(`${env.url}/v1/deployments/qwen-7b`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${env.token}` },
      });
      assertEquals(del.status, 200, await del.text());
      // A gateway API key: the gateway is no longer open after the restart (issue #23 item 10).
      const key = await trust.fetch(`${env.url}/v1/apikeys`, {
        method: "POST",
        headers: { authorization: `Bearer ${env.token}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "restart-test" }),
      });
      assertEquals(key.status, 201, await key.text());
      // The store holds token and key hashes: its owner's only (issue #23 item 10).
      for (const f of ["llmgw.db", "llmgw.db-wal"]) {
        assertEquals((Deno.statSync(join(dir, "control", f)).mode! & 0o777).toString(8), "600", f);
      }
      const before = env;
      trust.close();
      trust = undefined;
      dev.stop();
      assertEquals(await dev.running, 0);
      // The same directory again: nothing re-applied, the changes kept.
      dev = start();
      await until(
        "the restart said it keeps the deployments",
        () => /keeping this directory's deployments/.test(dev.output()),
        {
          timeoutMs: 60_000,
          intervalMs: 200,
          describe,
        },
      );
      assertOk(!/applied .*\.yaml/.test(dev.output()), dev.output());
      // The banner of the restart says what holds now: a key exists, the token is the same.
      const banner = dev.output().slice(dev.output().lastIndexOf("llmgw dev: a local cluster"));
      assertOk(!banner.includes("open to loopback until an API key exists"), banner);
      assertStringIncludes(banner, "needs an API key: 1 exists");
      assertStringIncludes(banner, "kept from this directory's last start");
      env = (await readDevEnv(dir))!;
      // The admin token is kept across restarts: shells and dashboard sessions stay signed in.
      assertEquals(env.token, before.token);
      trust = pinnedFetch(Deno.readTextFileSync(env.ca));
      assertEquals(await replicasOf(env, trust.fetch, "llama-8b"), 1);
      assertEquals(await replicasOf(env, trust.fetch, "qwen-7b"), undefined);
    } finally {
      trust?.close();
      dev.stop();
      assertEquals(await dev.running, 0);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
