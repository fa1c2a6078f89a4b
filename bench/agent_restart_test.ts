/**
 * Agent restarts lose no request (issue #23 item 4): real agent processes,
 * fake engines, an in-process control plane and gateway, requests at a
 * steady rate (bench/agent_restart.ts, which stops every process by pid even
 * on failure). One representative per fault.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { portBlock, portsOf } from "../tests/port_plan.ts";
import { runAgentRestart } from "./agent_restart.ts";

/** This file's ports (tests/port_plan.ts): 600 for each run, which needs that many. */
const PORTS = portsOf(import.meta.url);

Deno.test("a planned restart of the only replica's agent fails no request", async () => {
  const r = await runAgentRestart({
    fault: "restart",
    replicas: 1,
    rate: 10,
    restartAfterMs: 0,
    ports: portBlock(PORTS, 0, 600),
  });
  assertOk(r.ok > 0, "answers came");
  assertEquals(r.failed, {});
});

// The harder case of the two: with one replica nothing can take over, so
// requests must be held until the restarted agent's proxy answers. (Two
// replicas on two nodes: the other node serves; bench/agent_restart.ts.)
Deno.test("an agent killed with SIGKILL and restarted a second later: no request of its only replica fails", async () => {
  const r = await runAgentRestart({
    fault: "kill9",
    replicas: 1,
    rate: 10,
    restartAfterMs: 1_000,
    ports: portBlock(PORTS, 0, 600),
  });
  assertOk(r.ok > 0, "answers came");
  assertEquals(r.failed, {});
});
