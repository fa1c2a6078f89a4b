/**
 * The agent's pulls (issue #25 item 5): each desired `pull` fetched once,
 * stopped when no longer desired, a retryable failure tried again after a
 * while, a final one not until the pull is asked again, and reported in the
 * heartbeat while the pull is desired (a retryable one never is).
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { createLogger } from "../log/log.ts";
import { ModelFetchError } from "../supervisor/model_fetcher.ts";
import { ModelPuller, RETRY_MS } from "./model_pulls.ts";
import {
  HubGatedError,
  HubRevisionNotFoundError,
  HubUnreachableError,
} from "../models/hub_errors.ts";
import { InsufficientDiskError } from "./model_cache/disk_space.ts";
import { fetchError } from "./model_fetch.ts";
import { ModelCacheReporter, type ModelCacheReporterOptions } from "./model_cache_report.ts";

const A = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const pull = (model: string, on = true) => ({ model, commit: A, pinned: false, pull: on });

/** A fetcher whose calls the test settles by hand. */
function fetcher() {
  const calls: { model: string; signal: AbortSignal; settle: (e?: Error) => void }[] = [];
  return {
    calls,
    pull(model: string, _commit: string, signal: AbortSignal): Promise<string> {
      return new Promise((resolve, reject) => {
        calls.push({ model, signal, settle: (e) => e ? reject(e) : resolve(`/cache/${model}`) });
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    },
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("a pull is fetched once while desired, stopped when not", async () => {
  const f = fetcher();
  const lines: string[] = [];
  const p = new ModelPuller({
    fetcher: f,
    clock: new FakeClock(),
    log: createLogger("agent", (l) => lines.push(l)),
  });
  p.sync([pull("acme/a"), pull("acme/pinned-only", false)]);
  p.sync([pull("acme/a")]);
  assertEquals(f.calls.map((c) => c.model), ["acme/a"]);
  p.sync([]);
  assertOk(f.calls[0].signal.aborted);
  assertEquals(p.running, []);
  p.sync([pull("acme/b")]);
  f.calls[1].settle();
  await tick();
  assertEquals(p.running, []);
  assertOk(lines.some((l) => l.includes("model pulled") && l.includes("/cache/acme/b")));
  p.stop();
});

Deno.test("a retryable failure is tried again after a while; a final one only when asked again", async () => {
  const f = fetcher();
  const clock = new FakeClock();
  const p = new ModelPuller({ fetcher: f, clock, log: createLogger("agent", () => {}) });
  p.sync([pull("acme/a"), pull("acme/gated")]);
  f.calls[0].settle(new ModelFetchError("hub unreachable", true));
  f.calls[1].settle(new ModelFetchError("gated: set HF_TOKEN", false));
  await tick();
  p.sync([pull("acme/a"), pull("acme/gated")]);
  assertEquals(f.calls.length, 2, "not at once");
  clock.advance(RETRY_MS);
  p.sync([pull("acme/a"), pull("acme/gated")]);
  assertEquals(f.calls.map((c) => c.model), ["acme/a", "acme/gated", "acme/a"]);
  p.sync([pull("acme/a")]);
  p.sync([pull("acme/a"), pull("acme/gated")]);
  assertEquals(f.calls.at(-1)!.model, "acme/gated", "asked again after being dropped");
  p.stop();
  assertOk(f.calls.every((c) => c.signal.aborted || c !== f.calls.at(-1)));
});

Deno.test("a final failure is in every heartbeat while the pull is desired; a retryable one never", async () => {
  const f = fetcher();
  const clock = new FakeClock();
  const p = new ModelPuller({ fetcher: f, clock, log: createLogger("agent", () => {}) });
  const cache = {
    revisions: () => Promise.resolve([]),
    progress: () => [],
    eviction: { evict: () => Promise.resolve([]), room: () => Promise.resolve(1) },
  } as unknown as ModelCacheReporterOptions["cache"];
  // Wired as agent/agent_models.ts wires them.
  const reporter = new ModelCacheReporter({
    cache,
    watermarks: { highPercent: 90, lowPercent: 80 },
    desired: () => null,
    clock,
    log: createLogger("agent", () => {}),
    pullFailures: () => p.failures(),
  });
  const hub = "https://hub.example";
  const all = [pull("acme/typo"), pull("acme/down"), pull("acme/gated"), pull("acme/big")];
  p.sync(all);
  // As the fetcher rejects: fetchError over what the hub client or the cache threw.
  f.calls[1].settle(fetchError(new HubUnreachableError(hub, "connection refused")));
  await tick();
  assertEquals((await reporter.report())!.pulls_failed, undefined, "a retryable failure: not sent");
  f.calls[0].settle(fetchError(new HubRevisionNotFoundError("acme/typo", A, hub)));
  await tick();
  f.calls[2].settle(fetchError(new HubGatedError("acme/gated", false, hub)));
  clock.advance(5);
  f.calls[3].settle(fetchError(new InsufficientDiskError("/cache", `acme/big@${A}`, 9e9, 1e9)));
  await tick();
  const sent = (await reporter.report())!.pulls_failed!;
  assertEquals(sent.map((x) => [x.repo, x.commit, x.kind]), [
    ["acme/typo", A, "revision_not_found"],
    ["acme/gated", A, "gated"],
    ["acme/big", A, "insufficient_disk"],
  ]);
  assertEquals(sent[0].message, `model acme/typo revision ${A} not found on ${hub}`);
  assertEquals(
    sent[1].message,
    "model acme/gated is gated: set HF_TOKEN to a token that was granted access",
  );
  assertEquals([sent[0].at, sent[2].at], [clock.now() - 5, clock.now()]);
  // Sent again at the next heartbeat: nothing to acknowledge, the desired state is the answer.
  assertEquals((await reporter.report())!.pulls_failed!.length, 3);
  // The control plane marked them failed and dropped them: the agent forgets them.
  p.sync([pull("acme/down")]);
  assertEquals((await reporter.report())!.pulls_failed, undefined);
  // Asked again (an operator pulled again): tried at once, no failure reported meanwhile.
  p.sync([pull("acme/down"), pull("acme/typo")]);
  assertEquals(f.calls.at(-1)!.model, "acme/typo");
  assertEquals(p.failures(), []);
  p.stop();
});

Deno.test("a pull asked again under a new request is tried at once, though never seen dropped; a failure names its request", async () => {
  const f = fetcher();
  const clock = new FakeClock();
  const p = new ModelPuller({ fetcher: f, clock, log: createLogger("agent", () => {}) });
  const asked = (model: string, at: number) => ({ ...pull(model), requested_at: at });
  p.sync([asked("acme/gated", 1), asked("acme/down", 1)]);
  f.calls[0].settle(new ModelFetchError("gated: set HF_TOKEN", false));
  f.calls[1].settle(new ModelFetchError("hub unreachable", true));
  await tick();
  assertEquals(p.failures().map((x) => [x.repo, x.requested_at]), [["acme/gated", 1]]);
  p.sync([asked("acme/gated", 1), asked("acme/down", 1)]);
  assertEquals(f.calls.length, 2, "the same request: not tried again");
  // The operator pulled again before this agent saw the pull dropped (or both in one answer).
  p.sync([asked("acme/gated", 2), asked("acme/down", 2)]);
  assertEquals(f.calls.map((c) => c.model).slice(2), ["acme/gated", "acme/down"]);
  assertEquals(p.failures(), [], "the old failure is not sent against the new request");
  // A newer request while a fetch is under way: it goes on, and its failure names the newer one.
  p.sync([asked("acme/gated", 3), asked("acme/down", 3)]);
  assertEquals(f.calls.length, 4, "a fetch under way is not started again");
  f.calls[2].settle(new ModelFetchError("gated: set HF_TOKEN", false));
  await tick();
  assertEquals(p.failures().map((x) => [x.repo, x.requested_at]), [["acme/gated", 3]]);
  // An older control plane names no request: a final failure waits for the pull to be dropped.
  p.sync([pull("acme/old")]);
  f.calls[4].settle(new ModelFetchError("gated: set HF_TOKEN", false));
  await tick();
  p.sync([pull("acme/old")]);
  assertEquals(f.calls.length, 5);
  assertEquals(p.failures().map((x) => [x.repo, "requested_at" in x]), [["acme/old", false]]);
  p.stop();
});
