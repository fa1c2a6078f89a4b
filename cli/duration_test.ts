import { assertEquals } from "../tests/assert.ts";
import { durationMs } from "./duration.ts";

Deno.test("durations: units, zero, and what is not one", () => {
  assertEquals(
    ["0", "250ms", "90s", "30m", "12h", "7d"].map(durationMs),
    [0, 250, 90_000, 1_800_000, 43_200_000, 604_800_000],
  );
  for (const bad of ["", "5", "-1s", "1.5m", "5 m", "m", "1w", "9".repeat(30) + "d"]) {
    assertEquals(durationMs(bad), null, bad);
  }
});
