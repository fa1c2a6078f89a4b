/**
 * The agent's pulls (issue #25 item 5): each desired `pull` fetched once,
 * stopped when no longer desired, a retryable failure tried again after a
 * while, a final one not until the pull is asked again.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { createLogger } from "../log/log.ts";
import { ModelFetchError } from "../supervisor/model_fetcher.ts";
import { ModelPuller, RETRY_MS } from "./model_pulls.ts";

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
