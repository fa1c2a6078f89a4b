import { assertEquals } from "../tests/assert.ts";
import { compareVersions } from "./args.ts";

Deno.test("compareVersions: numeric; pre-releases ignored, or below their release when asked", () => {
  const sign = (a: string, b: string, preReleases?: "below") =>
    Math.sign(compareVersions(a, b, { preReleases }));
  const cases: [string, string, number, number][] = [
    // a, b, ignoring pre-releases, with pre-releases below
    ["0.9.2", "0.11.0", -1, -1],
    ["v0.5.3", "0.5.3", 0, 0],
    ["0.5.2.post1", "0.5.3", -1, -1],
    // A post-release counts as its release.
    ["0.5.3.post1", "0.5.3", 0, 0],
    ["0.5.3+cu128", "0.5.3", 0, 0],
    ["0.5.3rc0", "0.5.3", 0, -1],
    ["0.5.3.dev7", "0.5.3", 0, -1],
    ["0.5.3b1", "0.5.3", 0, -1],
    ["0.5.3", "0.5.3rc0", 0, 1],
    ["0.5.4rc0", "0.5.3", 1, 1],
    ["0.11.1rc2.dev12+g1234abcd", "0.11.1", 0, -1],
  ];
  for (const [a, b, ignored, below] of cases) {
    assertEquals([sign(a, b), sign(a, b, "below")], [ignored, below], `${a} vs ${b}`);
  }
});
