/** Unit tests for NVLink domains and GPU choice inside a node (design §7). */
import { assertEquals, assertThrows } from "../tests/assert.ts";
import { gpu, gpus, withDomains } from "../tests/cluster_builders.ts";
import { chooseGpus, nvlinkDomains } from "./gpu_choice.ts";

Deno.test("nvlinkDomains: connected components, sorted, ordered by lowest index", () => {
  assertEquals(nvlinkDomains(withDomains(gpus(8), [[6, 7], [0, 1], [2, 3, 4, 5]])), [
    [0, 1],
    [2, 3, 4, 5],
    [6, 7],
  ]);
  assertEquals(nvlinkDomains(withDomains(gpus(8), [[0, 1, 2, 3, 4, 5, 6, 7]])), [[
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
  ]]);
  assertEquals(nvlinkDomains(gpus(3)), [[0], [1], [2]]);
  assertEquals(nvlinkDomains([]), []);
});

Deno.test("nvlinkDomains: chains are transitive, one-sided links count, outside links are ignored", () => {
  // 0-1, 1-2 (chain), 3 → 4 listed only on 3, 5 links to 9 which is not in the list
  const list = [
    gpu(0, { peers: [1] }),
    gpu(1, { peers: [0, 2] }),
    gpu(2, { peers: [1] }),
    gpu(3, { peers: [4] }),
    gpu(4),
    gpu(5, { peers: [9] }),
  ];
  assertEquals(nvlinkDomains(list), [[0, 1, 2], [3, 4], [5]]);
  // higher index linking down to a lower one
  assertEquals(nvlinkDomains([gpu(2, { peers: [7] }), gpu(7, { peers: [] }), gpu(5)]), [
    [2, 7],
    [5],
  ]);
});

Deno.test("nvlinkDomains: non-contiguous indices and unsorted input", () => {
  const list = [gpu(6, { peers: [4] }), gpu(1, { peers: [3] }), gpu(4, { peers: [6] }), gpu(3)];
  assertEquals(nvlinkDomains(list), [[1, 3], [4, 6]]);
});

Deno.test("chooseGpus: unknown topology takes the lowest free indices", () => {
  assertEquals(chooseGpus(gpus(8), [1, 3, 4, 7], 2), [1, 3]);
  assertEquals(chooseGpus(gpus(8), [0, 1, 2, 3, 4, 5, 6, 7], 8), [0, 1, 2, 3, 4, 5, 6, 7]);
  assertEquals(chooseGpus(gpus(8), [5], 1), [5]);
  assertEquals(chooseGpus(gpus(2), [0, 1], 0), []);
});

Deno.test("chooseGpus: the smallest domain whose free GPUs suffice", () => {
  const list = withDomains(gpus(8), [[0, 1, 2, 3], [4, 5], [6, 7]]);
  const all = [0, 1, 2, 3, 4, 5, 6, 7];
  assertEquals(chooseGpus(list, all, 2), [4, 5]); // a pair, not part of the quad
  assertEquals(chooseGpus(list, all, 3), [0, 1, 2]);
  assertEquals(chooseGpus(list, all, 4), [0, 1, 2, 3]);
  assertEquals(chooseGpus(list, [0, 1, 2, 3, 6, 7], 2), [6, 7]);
  // a broken quad and a whole pair both have 2 free: the tie goes to the lower domain
  assertEquals(chooseGpus(list, [2, 3, 4, 5], 2), [2, 3]);
  // one free GPU left in the quad is used before breaking a whole pair
  assertEquals(chooseGpus(list, [3, 4, 5, 6, 7], 1), [3]);
});

Deno.test("chooseGpus: falls back to the lowest free when no domain suffices", () => {
  const pairs = withDomains(gpus(8), [[0, 1], [2, 3], [4, 5], [6, 7]]);
  assertEquals(chooseGpus(pairs, [1, 3, 5, 7], 2), [1, 3]);
  assertEquals(chooseGpus(pairs, [0, 1, 2, 3, 4, 5, 6, 7], 4), [0, 1, 2, 3]);
  assertEquals(chooseGpus(pairs, [0, 1, 2, 3, 4, 5, 6, 7], 8), [0, 1, 2, 3, 4, 5, 6, 7]);
});

Deno.test("chooseGpus: only free GPUs are chosen, also from domains", () => {
  const quads = withDomains(gpus(8), [[0, 1, 2, 3], [4, 5, 6, 7]]);
  // the broken quad's two free GPUs are used, keeping three linked GPUs together
  assertEquals(chooseGpus(quads, [0, 2, 5, 6, 7], 2), [0, 2]);
  assertEquals(chooseGpus(quads, [0, 2, 5, 6, 7], 3), [5, 6, 7]);
  assertEquals(chooseGpus(quads, [0, 2, 5, 6, 7], 4), [0, 2, 5, 6]);
});

Deno.test("chooseGpus: topology known only on some GPUs; singletons are domains of one", () => {
  const list = [gpu(0), gpu(1, { peers: [2] }), gpu(2, { peers: [1] }), gpu(3)];
  assertEquals(chooseGpus(list, [0, 1, 2, 3], 1), [0]);
  assertEquals(chooseGpus(list, [0, 1, 2, 3], 2), [1, 2]);
  assertEquals(chooseGpus(list, [0, 1, 2, 3], 3), [0, 1, 2]);
});

Deno.test("chooseGpus: refuses when fewer GPUs are free than asked", () => {
  assertThrows(() => chooseGpus(gpus(4), [0, 1], 3), RangeError, "only 2 free");
});
