/**
 * A control plane just big enough to drive a real agent in a test (the three
 * endpoints of protocol/agent_protocol.ts, every body validated with its
 * schemas, a desired state the test publishes), and the options of an agent
 * on the recorded L40S machine running the fake engine through its shims.
 * Used by agent/agent_test.ts and agent/agent_model_cache_test.ts.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { Hono } from "hono";
import { z } from "zod";
import { fixturePath } from "./fixtures.ts";
import {
  type DesiredShard,
  type DesiredState,
  type HeartbeatRequest,
  HeartbeatRequestSchema,
  type RegisterRequest,
  RegisterRequestSchema,
  type ShardReport,
} from "../protocol/agent_protocol.ts";
import type { AgentOptions } from "../agent/agent.ts";

/** The fake engine's shims (vllm, python3). */
export const SHIMS = fileURLToPath(new URL("../dev/fake_engine/bin", import.meta.url));
/** The recorded machine discovery reads. */
export const MACHINE = fixturePath("machines/l40s_pcie_vm");

/** A control plane just big enough to drive an agent, with counters for the test. */
export class StubControl {
  readonly joinToken: string;
  readonly tokens = new Map<string, string>();
  readonly registrations: { body: RegisterRequest; token: string }[] = [];
  readonly heartbeats: { body: HeartbeatRequest; token: string }[] = [];
  readonly invalid: string[] = [];
  desiredRequests = 0;
  refused = 0;
  state: DesiredState = { generation: 0, shards: [] };
  readonly #waiters = new Set<() => void>();
  #server: Deno.HttpServer<Deno.NetAddr> | null = null;
  #closing = false;
  port = 0;

  constructor(joinToken = `join-${crypto.randomUUID()}`) {
    this.joinToken = joinToken;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Publishes a desired state (`extra`: its model sources and models); held long polls answer at once. */
  publish(
    generation: number,
    shards: DesiredShard[],
    extra: Omit<DesiredState, "generation" | "shards"> = {},
  ): void {
    this.state = { generation, shards, ...extra };
    for (const w of [...this.#waiters]) w();
  }

  lastHeartbeat(): { body: HeartbeatRequest; token: string } | undefined {
    return this.heartbeats.at(-1);
  }

  #app(): Hono {
    const app = new Hono();
    const bearer = (h: string | undefined) => /^Bearer (\S+)$/.exec(h ?? "")?.[1] ?? "";
    const unauthorized = { error: { code: "unauthorized", message: "who are you?" } };
    app.post("/v1/agent/register", async (c) => {
      if (bearer(c.req.header("authorization")) !== this.joinToken) {
        return c.json(unauthorized, 401);
      }
      const parsed = RegisterRequestSchema.safeParse(await c.req.json());
      if (!parsed.success) {
        this.invalid.push(`register: ${JSON.stringify(parsed.error.issues)}`);
        return c.json({ error: { code: "bad_request", message: parsed.error.message } }, 400);
      }
      const token = `node-${crypto.randomUUID()}`;
      this.tokens.set(token, parsed.data.node_id);
      this.registrations.push({ body: parsed.data, token });
      return c.json({
        node_id: parsed.data.node_id,
        node_token: token,
        heartbeat_interval_ms: 100,
        some_future_field: true,
      });
    });
    app.post("/v1/agent/heartbeat", async (c) => {
      const token = bearer(c.req.header("authorization"));
      if (!this.tokens.has(token)) {
        this.refused++;
        return c.json(unauthorized, 401);
      }
      const parsed = HeartbeatRequestSchema.safeParse(await c.req.json());
      if (!parsed.success) {
        this.invalid.push(`heartbeat: ${JSON.stringify(parsed.error.issues)}`);
        return c.json({ error: { code: "bad_request", message: parsed.error.message } }, 400);
      }
      this.heartbeats.push({ body: parsed.data, token });
      return c.json({ generation: this.state.generation });
    });
    const Query = z.object({
      generation: z.coerce.number().int().min(0),
      wait_ms: z.coerce.number().int().min(0).max(120_000),
    });
    app.get("/v1/agent/desired", async (c) => {
      const token = bearer(c.req.header("authorization"));
      if (!this.tokens.has(token)) {
        this.refused++;
        return c.json(unauthorized, 401);
      }
      const q = Query.safeParse(c.req.query());
      if (!q.success) {
        this.invalid.push(`desired: ${JSON.stringify(q.error.issues)}`);
        return c.json({ error: { code: "bad_request", message: q.error.message } }, 400);
      }
      this.desiredRequests++;
      if (q.data.generation === this.state.generation && !this.#closing) {
        await new Promise<void>((resolve) => {
          // A poll the agent abandoned is held to its end; close() ends them all.
          const done = () => {
            clearTimeout(timer);
            this.#waiters.delete(done);
            resolve();
          };
          const timer = setTimeout(done, q.data.wait_ms);
          this.#waiters.add(done);
        });
      }
      if (this.#closing) {
        return c.json({ error: { code: "shutting_down", message: "bye" } }, 503);
      }
      return c.json(this.state);
    });
    return app;
  }

  start(port = 0): void {
    this.#closing = false;
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port, onListen: () => {} },
      this.#app().fetch,
    );
    this.port = this.#server.addr.port;
  }

  async close(): Promise<void> {
    this.#closing = true;
    for (const w of [...this.#waiters]) w();
    await this.#server?.shutdown();
    this.#server = null;
  }
}

/** A port free a moment ago. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The local API token of {@link agentOptions}' agents. */
export const LOCAL_TOKEN = `local-${crypto.randomUUID()}`;

/** A test agent's options: node-a on the L40S machine, fast ticks and retries, logs to `logs`. */
export function agentOptions(
  controlUrl: string,
  joinToken: string,
  stateDir: string,
  logs: string[],
): AgentOptions {
  return {
    controlUrl,
    joinToken,
    nodeId: "node-a",
    hostname: "node-a.test",
    stateDir,
    discovery: {
      nvidiaSmi: `${MACHINE}/nvidia-smi`,
      sysfsRoot: `${MACHINE}/sysfs`,
      fabrics: { "roce-a": ["mlx5_0"], "ib-a": ["mlx5_1"] },
    },
    labels: { zone: "test-1" },
    mgmtAddr: "127.0.0.1",
    mgmtInterface: "lo",
    // A fixed port, as in production: the agent's URL is part of its registration.
    listen: { hostname: "127.0.0.1", port: freePort() },
    proxyListen: { hostname: "127.0.0.1", port: 0 },
    localToken: LOCAL_TOKEN,
    supervisor: {
      tickMs: 50,
      probeTimeoutMs: 500,
      stopGraceMs: 3_000,
      env: {
        PATH: `${SHIMS}:${Deno.env.get("PATH")}`,
        FAKE_ENGINE_LOAD_SECONDS: "0.5",
        FAKE_ENGINE_ACCESS_LOG: "0",
      },
    },
    rediscoverMs: 300,
    retry: { initialMs: 50, maxMs: 400, factor: 2 },
    agentVersion: "0.1.0-test",
    logSink: (line) => {
      logs.push(line);
      if (Deno.env.get("LLMGW_TEST_LOGS")) console.error(line);
    },
  };
}

/** The latest heartbeat's report of shard `id` when it satisfies `pred`. */
export function reported(
  stub: StubControl,
  id: string,
  pred: (s: ShardReport, hb: HeartbeatRequest) => boolean,
  since = 0,
): ShardReport | undefined {
  const hb = stub.heartbeats.length > since ? stub.lastHeartbeat()?.body : undefined;
  const s = hb?.shards.find((x) => x.id === id);
  return s !== undefined && pred(s, hb!) ? s : undefined;
}
