import { assertEquals } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { DownloadProgress } from "./download_progress.ts";

Deno.test("DownloadProgress: bytes, a moving rate over 10 s, the ETA it implies, sources", () => {
  const clock = new FakeClock();
  const p = new DownloadProgress("org/m", "c".repeat(40), 10_000, clock);
  p.resumed(2_000); // on disk before a restart: done, but not part of the rate
  assertEquals(p.report().etaSeconds, null);
  p.sourceUse("hub", 1);
  p.sourceUse("peer-b", 1);
  p.sourceUse("hub", 1);
  p.sourceUse("hub", -1);
  for (let i = 0; i < 4; i++) {
    clock.advance(1_000);
    p.add(500);
  }
  const r = p.report();
  assertEquals(r.bytesDone, 4_000);
  assertEquals(r.bytesTotal, 10_000);
  assertEquals(r.rateBytesPerSecond, 500);
  assertEquals(r.etaSeconds, 12);
  assertEquals(r.sources, ["hub", "peer-b"]);
  // 20 s later at 100 B/s: the old fast samples fell out of the window.
  for (let i = 0; i < 20; i++) {
    clock.advance(1_000);
    p.add(100);
  }
  assertEquals(p.report().rateBytesPerSecond, 100);
  p.sourceUse("hub", -1);
  p.sourceUse("peer-b", -1);
  assertEquals(p.report().sources, []);
});
