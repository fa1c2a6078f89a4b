/**
 * One shard's model fetch for its runner: outcomes become machine events,
 * a stopped fetch's outcome is never fed, the report shows the fetcher's
 * progress only while downloading (with the machine's error and count), and
 * the next spawn's receipt gets the download once.
 */
import { assertEquals } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { desiredLaunch } from "../tests/shard_launch.ts";
import { ReceiptRecorder } from "./cold_start_receipt.ts";
import {
  type DownloadProgress,
  type FetchedModel,
  type ModelFetcher,
  ModelFetchError,
} from "./model_fetcher.ts";
import { initialShard } from "./shard_machine.ts";
import { type FetchOutcome, ShardModel } from "./shard_model.ts";

/** A fetcher whose fetches the test settles by hand. */
class ManualFetcher implements ModelFetcher {
  settle: ((r: FetchedModel | Error) => void)[] = [];
  seen: AbortSignal[] = [];
  now: DownloadProgress | null = null;
  fetch(_shard: unknown, signal: AbortSignal): Promise<FetchedModel> {
    this.seen.push(signal);
    return new Promise((resolve, reject) =>
      this.settle.push((r) => r instanceof Error ? reject(r) : resolve(r))
    );
  }
  progress(): DownloadProgress | null {
    return this.now;
  }
}

const SHARD = { id: "s", engine: "vllm", launch: desiredLaunch("s", { model: "acme/tiny" }) };
const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("shard model: a fetch's end is the machine's event; a stopped one's is never fed", async () => {
  const clock = new FakeClock();
  const fetcher = new ManualFetcher();
  const said: string[] = [];
  const model = new ShardModel(fetcher, SHARD, clock, (e) => said.push(e.message));
  const got: FetchOutcome[] = [];
  model.act({ type: "fetch_model" }, (o) => got.push(o));
  clock.advance(2_500);
  fetcher.settle[0]({ path: "/cache/snap", bytes: 4096 });
  await tick();
  assertEquals(got, [{ type: "model_ready", path: "/cache/snap" }]);
  model.act({ type: "fetch_model" }, (o) => got.push(o));
  model.act({ type: "fetch_stop" }, (o) => got.push(o));
  assertEquals(fetcher.seen[1].aborted, true, "the fetch is told to stop");
  fetcher.settle[1](new ModelFetchError("gone", true));
  await tick();
  assertEquals(got.length, 1, "nothing fed after the stop");
  model.act({ type: "fetch_model" }, (o) => got.push(o));
  fetcher.settle[2](new ModelFetchError("model acme/tiny is gated: set HF_TOKEN", false));
  await tick();
  model.act({ type: "fetch_model" }, (o) => got.push(o));
  fetcher.settle[3](new Error("socket hang up"));
  await tick();
  model.act({ type: "fetch_model" }, (o) => got.push(o));
  fetcher.settle[4](new ModelFetchError("needs 2 GiB, 1 GiB free", false, "insufficient_disk"));
  await tick();
  assertEquals(got.slice(1), [
    { type: "model_failed", reason: "model acme/tiny is gated: set HF_TOKEN", retryable: false },
    { type: "model_failed", reason: "socket hang up", retryable: true },
    {
      type: "model_failed",
      reason: "needs 2 GiB, 1 GiB free",
      retryable: false,
      kind: "insufficient_disk",
    },
  ]);
  model.act({ type: "fetch_retry", message: "model fetch 1 failed: x" }, () => {});
  assertEquals(said, ["model fetch 1 failed: x"]);
});

Deno.test("shard model: the report while downloading, and the receipt's download once", async () => {
  const clock = new FakeClock();
  const fetcher = new ManualFetcher();
  const model = new ShardModel(fetcher, SHARD, clock, () => {});
  const m = { ...initialShard(clock.now()), state: "downloading" as const, fetching: true };
  assertEquals(model.report(m), {
    model: "acme/tiny",
    commit: null,
    bytes_done: 0,
    bytes_total: 0,
    rate_bytes_per_second: 0,
    eta_seconds: null,
    sources: [],
    last_error: null,
    failures: 0,
  });
  fetcher.now = {
    model: "acme/tiny",
    commit: "c".repeat(40),
    bytes_done: 10,
    bytes_total: 100,
    rate_bytes_per_second: 5,
    eta_seconds: 18,
    sources: ["hub"],
  };
  assertEquals(model.report(m)?.sources, ["hub"]);
  // Between tries: no rate or source, the machine's error and count.
  const waiting = { ...m, fetching: false, fetchError: "unreachable", fetchFailures: 2 };
  const r = model.report(waiting)!;
  assertEquals([r.bytes_done, r.rate_bytes_per_second, r.sources, r.last_error, r.failures], [
    10,
    0,
    [],
    "unreachable",
    2,
  ]);
  assertEquals(model.report({ ...m, state: "starting" }), null);

  model.act({ type: "fetch_model" }, () => {});
  clock.advance(3_000);
  fetcher.settle[0]({ path: "/p", bytes: 100 });
  await tick();
  const recorder = new ReceiptRecorder();
  recorder.spawned(clock.now(), []);
  model.spawned(recorder);
  assertEquals(recorder.receipt?.download, { seconds: 3, bytes: 100 });
  const again = new ReceiptRecorder();
  again.spawned(clock.now(), []);
  model.spawned(again);
  assertEquals(again.receipt?.download, null, "a restart's receipt has no download");
});

Deno.test("shard model: the receipt's download names the sources the fetch says supplied it", async () => {
  const clock = new FakeClock();
  const fetcher = new ManualFetcher();
  const model = new ShardModel(fetcher, SHARD, clock, () => {});
  model.act({ type: "fetch_model" }, () => {});
  clock.advance(2_000);
  const sources = [{ kind: "peer" as const, name: "peer h100-a", bytes: 100 }];
  fetcher.settle[0]({ path: "/p", bytes: 100, sources });
  await tick();
  const recorder = new ReceiptRecorder();
  recorder.spawned(clock.now(), []);
  model.spawned(recorder);
  assertEquals(recorder.receipt?.download, { seconds: 2, bytes: 100, sources });
});
