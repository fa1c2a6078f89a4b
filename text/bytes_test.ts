import { assertEquals } from "../tests/assert.ts";
import { formatBytes, formatRate, formatSeconds } from "./bytes.ts";

Deno.test("formatBytes, formatRate, formatSeconds (table)", () => {
  const cases: [string, string][] = [
    [formatBytes(800), "800 B"],
    [formatBytes(1536), "1.5 KiB"],
    [formatBytes(1.2 * 2 ** 30), "1.2 GiB"],
    [formatRate(1.2 * 2 ** 30), "1.2 GiB/s"],
    [formatRate(0), "0 B/s"],
    [formatSeconds(31), "31s"],
    [formatSeconds(30.2), "31s"],
    [formatSeconds(250), "4m10s"],
    [formatSeconds(7500), "2h05m"],
  ];
  for (const [got, want] of cases) assertEquals(got, want);
});
