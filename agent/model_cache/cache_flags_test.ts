import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CacheFlagError, cacheSettings } from "./cache_flags.ts";
import { DownloadRateError } from "./download_rate.ts";
import { WatermarkError } from "./eviction_plan.ts";

Deno.test("cacheSettings: defaults under the state directory, no rate limit, 90/80 %", () => {
  assertEquals(cacheSettings({}, "/var/lib/llmgw", "/"), {
    root: "/var/lib/llmgw/models",
    rateBytesPerSecond: null,
    watermarks: { highPercent: 90, lowPercent: 80 },
  });
  assertEquals(cacheSettings({}, "state", "/home/op").root, "/home/op/state/models");
});

Deno.test("cacheSettings reads each flag, and says which one is wrong", () => {
  const s = cacheSettings(
    {
      modelCache: "/root/.cache/huggingface/hub",
      downloadRate: "1GiB/s",
      cacheHigh: "95%",
      cacheLow: "70",
    },
    "/var/lib/llmgw",
    "/",
  );
  assertEquals(s, {
    root: "/root/.cache/huggingface/hub",
    rateBytesPerSecond: 2 ** 30,
    watermarks: { highPercent: 95, lowPercent: 70 },
  });
  assertThrows(
    () => cacheSettings({ modelCache: " " }, "/s", "/"),
    CacheFlagError,
    "--model-cache: value is empty",
  );
  assertThrows(
    () => cacheSettings({ downloadRate: "fast" }, "/s", "/"),
    DownloadRateError,
    "--download-rate",
  );
  assertThrows(
    () => cacheSettings({ cacheHigh: "101" }, "/s", "/"),
    WatermarkError,
    "--cache-high",
  );
  assertThrows(
    () => cacheSettings({ cacheLow: "95%" }, "/s", "/"),
    WatermarkError,
    "must be under",
  );
});
