/**
 * The peer server's counters on `/metrics` (issue #25 item 3): zeros
 * without a peer server, its counts with one, and an exposition the linter
 * (and promtool, where installed) accepts.
 */
import { assertEquals } from "../tests/assert.ts";
import { lintExposition, parseExposition } from "../tests/prometheus_lint.ts";
import { emptyAgentMetrics, renderAgentMetrics } from "./metrics.ts";

function samples(text: string, family: string): Record<string, number> {
  const f = parseExposition(text).find((x) => x.name === family)!;
  return Object.fromEntries(f.samples.map((s) => [JSON.stringify(s.labels), s.value]));
}

Deno.test("peer metrics: zeros without a peer server, its counts with one", () => {
  const none = renderAgentMetrics(emptyAgentMetrics());
  assertEquals(lintExposition(none), []);
  assertEquals(samples(none, "llmgw_agent_peer_bytes_served_total"), { "{}": 0 });
  const text = renderAgentMetrics({
    ...emptyAgentMetrics(),
    peer: {
      bytesServed: 3 * 2 ** 30,
      rangesServed: 192,
      rangesStreamed: 40,
      refused: { not_held: 1, range_pending: 7, busy: 2 },
      uploads: 3,
      waiting: 2,
    },
  });
  assertEquals(lintExposition(text), []);
  assertEquals(samples(text, "llmgw_agent_peer_bytes_served_total"), { "{}": 3 * 2 ** 30 });
  assertEquals(samples(text, "llmgw_agent_peer_ranges_served_total"), { "{}": 192 });
  assertEquals(samples(text, "llmgw_agent_peer_ranges_refused_total"), {
    '{"reason":"not_held"}': 1,
    '{"reason":"range_pending"}': 7,
    '{"reason":"busy"}': 2,
  });
  assertEquals(samples(text, "llmgw_agent_peer_uploads"), { "{}": 3 });
  assertEquals(samples(text, "llmgw_agent_peer_ranges_streamed_total"), { "{}": 40 });
  assertEquals(samples(text, "llmgw_agent_peer_uploads_waiting"), { "{}": 2 });
});
