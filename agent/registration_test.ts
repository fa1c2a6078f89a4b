/**
 * The node's registration (design §10) against a fake control-plane client
 * and a temporary state directory: the stored token taken up, one
 * registration shared by concurrent callers and stored, a refused token
 * forgotten once, failed attempts retried, and the heartbeat interval's
 * bounds.
 */
import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import type { RegisterRequest, RegisterResponse } from "../protocol/agent_protocol.ts";
import { ControlError } from "./control_client.ts";
import { readSession, type StoredSession, writeSession } from "./credentials.ts";
import type { Logger, LogLevel } from "../log/log.ts";
import { clampInterval, Registration, type RegistrationOptions } from "./registration.ts";

const CONTROL = "http://control.example:8080";

interface Line {
  level: LogLevel;
  msg: string;
  fields: Record<string, unknown>;
}

/** A client whose register answers from `answers` in turn (an Error is thrown). */
class FakeClient {
  nodeToken: string | null = null;
  readonly requests: RegisterRequest[] = [];
  /** Called when a registration comes with no answer left: the test stops the agent. */
  exhausted: () => void = () => {};
  readonly #answers: (RegisterResponse | Error)[];

  constructor(answers: (RegisterResponse | Error)[] = []) {
    this.#answers = answers;
  }

  setNodeToken(token: string | null): void {
    this.nodeToken = token;
  }

  register(req: RegisterRequest): Promise<RegisterResponse> {
    this.requests.push(req);
    const a = this.#answers.shift();
    if (a === undefined) {
      this.exhausted();
      return Promise.reject(new Error("no answer scripted"));
    }
    if (a instanceof Error) return Promise.reject(a);
    this.nodeToken = a.node_token;
    return Promise.resolve(a);
  }
}

async function setup(client: FakeClient, extra: Partial<RegistrationOptions> = {}) {
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw-registration-" });
  const lines: Line[] = [];
  const log: Logger = {
    log: (level, msg, fields = {}) => lines.push({ level, msg, fields }),
    info: (msg, fields) => log.log("info", msg, fields),
    warn: (msg, fields) => log.log("warn", msg, fields),
    error: (msg, fields) => log.log("error", msg, fields),
  };
  let registered = 0;
  const stop = new AbortController();
  client.exhausted = () => stop.abort();
  const registration = new Registration({
    client,
    nodeId: "node-a",
    stateDir,
    controlUrl: CONTROL,
    controlUrls: [CONTROL],
    tls: () => null,
    facts: () => ({
      identity: {
        nodeId: "node-a",
        hostname: "node-a.example",
        mgmtAddr: "10.0.0.1",
        mgmtInterface: "eth0",
        agentUrl: "http://10.0.0.1:9180",
        labels: { zone: "a" },
        agentVersion: "1.2.3",
      },
      hardware: { gpus: [], fabrics: [] },
      localToken: "local-token-123",
      proxyUrl: "http://10.0.0.1:9181",
      proxyToken: "proxy-token-123",
    }),
    onRegistered: () => registered++,
    retry: { initialMs: 1, maxMs: 1, factor: 2 },
    log,
    signal: stop.signal,
    ...extra,
  });
  const said = (msg: string) => lines.filter((l) => l.msg === msg);
  return { stateDir, registration, said, registered: () => registered, stop };
}

function session(over: Partial<StoredSession> = {}): StoredSession {
  return {
    control_url: CONTROL,
    node_id: "node-a",
    registered_id: "node-a-1",
    node_token: "stored-token",
    heartbeat_interval_ms: 2_000,
    fingerprint: "",
    ...over,
  };
}

Deno.test("clampInterval keeps the heartbeat interval within 100 ms and 10 minutes", () => {
  const table: [number, number][] = [
    [5_000, 5_000],
    [0, 100],
    [-1, 100],
    [99, 100],
    [600_001, 600_000],
    [Infinity, 5_000],
    [NaN, 5_000],
  ];
  for (const [ms, want] of table) assertEquals(clampInterval(ms), want, `clampInterval(${ms})`);
  fc.assert(fc.property(fc.double(), (ms) => {
    const got = clampInterval(ms);
    assertOk(got >= 100 && got <= 600_000, `clampInterval(${ms}) = ${got}`);
    if (ms >= 100 && ms <= 600_000) assertEquals(got, ms);
  }));
});

Deno.test("a stored node token is taken up with its registered id and interval", async () => {
  const client = new FakeClient();
  const s = await setup(client);
  try {
    assertEquals(s.registration.resume(), null);
    writeSession(s.stateDir, session());
    assertEquals(s.registration.resume()?.node_token, "stored-token");
    assertEquals(client.nodeToken, "stored-token");
    assertEquals(s.registration.registeredId, "node-a-1");
    assertEquals(s.registration.intervalMs, 2_000);
    assertEquals(await s.registration.ensureRegistered(), true);
    assertEquals(client.requests.length, 0);
  } finally {
    await Deno.remove(s.stateDir, { recursive: true });
  }
});

Deno.test("the operator's heartbeat interval wins over the stored one", async () => {
  const s = await setup(new FakeClient(), { heartbeatIntervalMs: 750 });
  try {
    assertEquals(s.registration.intervalMs, 750);
    writeSession(s.stateDir, session());
    s.registration.resume();
    assertEquals(s.registration.intervalMs, 750);
  } finally {
    await Deno.remove(s.stateDir, { recursive: true });
  }
});

Deno.test("concurrent callers share one registration, which is stored and announced", async () => {
  const client = new FakeClient([
    { node_id: "node-a-7", node_token: "fresh-token", heartbeat_interval_ms: 3_000 },
  ]);
  const s = await setup(client);
  try {
    const both = await Promise.all([
      s.registration.ensureRegistered(),
      s.registration.ensureRegistered(),
    ]);
    assertEquals(both, [true, true]);
    assertEquals(client.requests.length, 1);
    const req = client.requests[0] as RegisterRequest & Record<string, unknown>;
    assertEquals(req.agent_token, "local-token-123");
    assertEquals(req.proxy_url, "http://10.0.0.1:9181");
    assertEquals(req.proxy_token, "proxy-token-123");
    assertEquals(s.registered(), 1);
    assertEquals(s.registration.registeredId, "node-a-7");
    assertEquals(s.registration.intervalMs, 3_000);
    const stored = readSession(s.stateDir, CONTROL, "node-a");
    assertEquals(stored?.node_token, "fresh-token");
    assertEquals(stored?.registered_id, "node-a-7");
    assertEquals(s.said("the control plane registered this node under another id").length, 1);
  } finally {
    await Deno.remove(s.stateDir, { recursive: true });
  }
});

Deno.test("a failed registration is retried and logged with its attempt", async () => {
  const client = new FakeClient([
    new ControlError("network", "connection refused"),
    { node_id: "node-a", node_token: "fresh-token", heartbeat_interval_ms: 5_000 },
  ]);
  const s = await setup(client);
  try {
    assertEquals(await s.registration.ensureRegistered(), true);
    assertEquals(
      s.said("registration failed").map((l) => [l.fields.attempt, l.fields.kind]),
      [[1, "network"]],
    );
    assertEquals(client.requests.length, 2);
  } finally {
    await Deno.remove(s.stateDir, { recursive: true });
  }
});

Deno.test("a stopped agent gives up registering", async () => {
  const s = await setup(new FakeClient());
  try {
    s.stop.abort();
    assertEquals(await s.registration.ensureRegistered(), false);
    assertEquals(s.registered(), 0);
  } finally {
    await Deno.remove(s.stateDir, { recursive: true });
  }
});

Deno.test("a refused node token is forgotten once and its stored copy removed", async () => {
  const client = new FakeClient();
  const s = await setup(client);
  try {
    writeSession(s.stateDir, session());
    s.registration.resume();
    const refusal = new ControlError("http", "refused", { status: 401, code: "unauthorized" });
    // A refusal of a token no longer in use changes nothing.
    await s.registration.refused("older-token", refusal);
    assertEquals(client.nodeToken, "stored-token");
    await s.registration.refused("stored-token", refusal);
    assertEquals(client.nodeToken, null);
    assertEquals(readSession(s.stateDir, CONTROL, "node-a"), null);
    assertEquals(
      s.said("the control plane refused the node token; registering again").map((l) => l.fields),
      [{ status: 401, code: "unauthorized" }],
    );
  } finally {
    await Deno.remove(s.stateDir, { recursive: true });
  }
});
