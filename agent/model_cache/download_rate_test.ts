import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { DownloadRateError, parseDownloadRate } from "./download_rate.ts";

Deno.test("parseDownloadRate reads the units operators write", () => {
  assertEquals(parseDownloadRate("200MB/s"), 200_000_000);
  assertEquals(parseDownloadRate("1.5GiB/s"), 1.5 * 2 ** 30);
  assertEquals(parseDownloadRate("800Mbit/s"), 100_000_000);
  assertEquals(parseDownloadRate("50m"), 50_000_000);
  assertEquals(parseDownloadRate("4096"), 4096);
  assertEquals(parseDownloadRate(" 10 KiB/s "), 10_240);
  assertEquals(parseDownloadRate("unlimited"), null);
  assertEquals(parseDownloadRate("0"), null);
});

Deno.test("parseDownloadRate says what is wrong", () => {
  assertThrows(
    () => parseDownloadRate(""),
    DownloadRateError,
    "Cannot parse --download-rate: value is empty",
  );
  assertThrows(() => parseDownloadRate("fast"), DownloadRateError, '"fast" is not a rate');
  assertThrows(() => parseDownloadRate("-5MB/s"), DownloadRateError, "is not a rate");
  assertThrows(() => parseDownloadRate("5 parsecs"), DownloadRateError, 'unknown unit "parsecs"');
  assertThrows(() => parseDownloadRate("0.5"), DownloadRateError, "under 1 byte/s");
});
