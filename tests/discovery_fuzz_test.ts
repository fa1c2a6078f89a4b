/**
 * Property tests: garbage from nvidia-smi and sysfs gives per-item problems
 * or the parser's own error, never another exception, and bounded output.
 */
import fc from "fast-check";
import { assertOk } from "./assert.ts";
import {
  GPU_QUERY_FIELDS,
  NvidiaSmiParseError,
  parseComputeApps,
  parseGpuQuery,
  parseTopoMatrix,
  readInfinibandAdapters,
  TopoParseError,
} from "../discovery/mod.ts";

function onlyDomainErrors(fn: () => unknown, ...allowed: (new (m: string) => Error)[]): void {
  try {
    fn();
  } catch (e) {
    if (!allowed.some((cls) => e instanceof cls)) throw e;
  }
}

const CELLS = [
  "[N/A]",
  "N/A",
  "[Not Supported]",
  "[Unknown Error]",
  "[GPU requires reset]",
  "ERR!",
  "",
  "0",
  "-1",
  "81559 MiB",
  "9.0",
  "NVIDIA H100 80GB HBM3",
  "NVIDIA",
  "Tesla",
  "00000000:18:00.0",
  "GPU-1",
  "1e309",
  "0x1F",
];

Deno.test("parseGpuQuery never throws anything but its parse error on arbitrary text", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 2000 }), (text) => {
      onlyDomainErrors(() => parseGpuQuery(text), NvidiaSmiParseError);
    }),
    { numRuns: 500 },
  );
});

Deno.test("parseGpuQuery on any header subset with hostile cells gives sane GPUs", () => {
  const header = fc.subarray([...GPU_QUERY_FIELDS], { minLength: 1 }).chain((fields) =>
    fc.shuffledSubarray(fields, { minLength: fields.length, maxLength: fields.length })
  );
  fc.assert(
    fc.property(
      header,
      fc.array(fc.array(fc.oneof(fc.constantFrom(...CELLS), fc.string()), { maxLength: 12 }), {
        maxLength: 10,
      }),
      (fields, rows) => {
        const text = [fields.join(", "), ...rows.map((r) => r.join(", "))].join("\n");
        const { gpus, problems } = parseGpuQuery(text);
        assertOk(gpus.length <= rows.length);
        const indices = new Set(gpus.map((g) => g.index));
        assertOk(indices.size === gpus.length, "duplicate GPU index");
        for (const g of gpus) {
          assertOk(Number.isInteger(g.index) && g.index >= 0);
          for (const n of [g.memory_total_mb, g.memory_used_mb, g.health.ecc_errors]) {
            assertOk(n === null || Number.isFinite(n), `non-finite number ${n}`);
          }
          // A GPU with no class can never be placed, so it must say why.
          if (g.class === null) assertOk(g.health.problems.length > 0);
        }
        assertOk(problems.length <= 25);
      },
    ),
    { numRuns: 400 },
  );
});

Deno.test("parseTopoMatrix and parseComputeApps survive arbitrary text", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 2000 }), (text) => {
      onlyDomainErrors(() => parseTopoMatrix(text), TopoParseError);
      onlyDomainErrors(() => parseComputeApps(text), NvidiaSmiParseError);
      onlyDomainErrors(
        () => parseTopoMatrix(`\tGPU0\tGPU1\tCPU Affinity\n${text}`),
        TopoParseError,
      );
      onlyDomainErrors(() => parseComputeApps(`gpu_uuid, pid, used_memory [MiB]\n${text}`));
    }),
    { numRuns: 500 },
  );
});

Deno.test("huge garbage output yields a bounded list of problems", () => {
  const line = "x".repeat(200);
  const text = "index, name\n" + Array(50_000).fill(line).join("\n");
  const { gpus, problems } = parseGpuQuery(text);
  assertOk(gpus.length === 0);
  assertOk(problems.length === 21, `got ${problems.length} problems`);
  assertOk(problems.every((p) => p.length < 400));
});

Deno.test("readInfinibandAdapters survives random bytes in every attribute file", async () => {
  const root = await Deno.makeTempDir();
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uint8Array({ maxLength: 64 }), { minLength: 5, maxLength: 5 }),
        async (contents) => {
          const port = `${root}/class/infiniband/mlx5_0/ports/1`;
          await Deno.mkdir(`${port}/gid_attrs/types`, { recursive: true });
          await Deno.mkdir(`${port}/gids`, { recursive: true });
          const files = ["state", "phys_state", "rate", "link_layer", "gids/0"];
          for (const [i, f] of files.entries()) await Deno.writeFile(`${port}/${f}`, contents[i]);
          await Deno.writeFile(`${port}/gid_attrs/types/0`, contents[4]);
          const { hcas } = await readInfinibandAdapters(root);
          assertOk(hcas.length === 1 && hcas[0].ports.length === 1);
          const p = hcas[0].ports[0];
          assertOk(p.rate_gbps === null || Number.isFinite(p.rate_gbps));
          assertOk(!p.active || (p.state === "ACTIVE" && p.physical_state === "LinkUp"));
        },
      ),
      { numRuns: 100 },
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
