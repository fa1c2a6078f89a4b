import { assertEquals, assertThrows } from "../tests/assert.ts";
import { NvidiaSmiParseError, parseCsvTable, smiNumber, smiValue } from "./nvidia_smi_csv.ts";

Deno.test("smiValue tells values, unknowns and error states apart", () => {
  const cases: [string, "value" | "unknown" | "error"][] = [
    ["81559 MiB", "value"],
    ["0", "value"],
    ["[N/A]", "unknown"],
    ["N/A", "unknown"],
    ["[Not Supported]", "unknown"],
    ["[Insufficient Permissions]", "unknown"],
    // Recorded in the nvidia_gpu_exporter captures (driver 590+).
    ["[Requested functionality has been deprecated]", "unknown"],
    ["", "unknown"],
    ["[Unknown Error]", "error"],
    ["[GPU requires reset]", "error"],
    ["[GPU is lost]", "error"],
    ["ERR!", "error"],
  ];
  for (const [cell, kind] of cases) assertEquals(smiValue(cell).kind, kind, cell);
});

Deno.test("smiNumber drops the header's unit and refuses anything else", () => {
  assertEquals(smiNumber("81559 MiB", "MiB"), 81559);
  assertEquals(smiNumber("81559", "MiB"), 81559); // --format=csv,nounits
  assertEquals(smiNumber("41", null), 41);
  assertEquals(smiNumber("100 %", "%"), 100);
  assertEquals(smiNumber("2.5", null), 2.5);
  assertEquals(smiNumber("81559 GiB", "MiB"), null);
  assertEquals(smiNumber("lots", null), null);
  assertEquals(smiNumber("0x0000", null), null);
});

Deno.test("parseCsvTable reads fields and units from the header", () => {
  const t = parseCsvTable("index, memory.total [MiB], name\n0, 81559 MiB, NVIDIA H100 80GB HBM3\n");
  assertEquals(t.columns, [
    { field: "index", unit: null },
    { field: "memory.total", unit: "MiB" },
    { field: "name", unit: null },
  ]);
  assertEquals(t.rows, [{ line: 2, cells: ["0", "81559 MiB", "NVIDIA H100 80GB HBM3"] }]);
  assertEquals(t.problems, []);
});

Deno.test("parseCsvTable reports a truncated row by line and keeps the others", () => {
  const t = parseCsvTable("index, name, memory.total [MiB]\n0, A, 1 MiB\n1, B\n2, C, 3 MiB\n");
  assertEquals(t.rows.map((r) => r.cells[0]), ["0", "2"]);
  assertEquals(t.problems.length, 1);
  assertEquals(t.problems[0].startsWith("nvidia-smi CSV line 3: expected 3 values, got 2"), true);
});

Deno.test("parseCsvTable refuses output without a header", () => {
  assertThrows(() => parseCsvTable(""), NvidiaSmiParseError, "output is empty");
  assertThrows(() => parseCsvTable("   \n\n"), NvidiaSmiParseError, "output is empty");
  assertThrows(
    () => parseCsvTable("0, NVIDIA H100 80GB HBM3, 81559 MiB\n"),
    NvidiaSmiParseError,
    "line 1 is not a header row",
  );
});

Deno.test("parseCsvTable strips ANSI colour codes", () => {
  const t = parseCsvTable("\x1b[1mindex, name\x1b[0m\n0, X\n");
  assertEquals(t.columns.map((c) => c.field), ["index", "name"]);
});
