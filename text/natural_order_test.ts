import { assertEquals } from "../tests/assert.ts";
import { compareNatural } from "./natural_order.ts";

Deno.test("compareNatural: numbers by value, then a total order", () => {
  const cases: [string[], string[]][] = [
    [["n10", "n2", "n1"], ["n1", "n2", "n10"]],
    [["mlx5_10", "mlx5_2", "mlx5_0"], ["mlx5_0", "mlx5_2", "mlx5_10"]],
    [["gpu-node-10.rack2", "gpu-node-9.rack10", "gpu-node-9.rack2"], [
      "gpu-node-9.rack2",
      "gpu-node-9.rack10",
      "gpu-node-10.rack2",
    ]],
    [["b", "a", "B"], ["a", "b", "B"]],
    // The collator calls these equal; the tie-break still orders them.
    [["n01", "n1"], ["n01", "n1"]],
    [["n1", "n01"], ["n01", "n1"]],
  ];
  for (const [input, want] of cases) assertEquals([...input].sort(compareNatural), want);
  assertEquals(compareNatural("x", "x"), 0);
  assertEquals(Math.sign(compareNatural("n01", "n1")), -Math.sign(compareNatural("n1", "n01")));
});
