import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { parseRecord, planChunks, recordHeader, recordLine } from "./chunk_record.ts";

Deno.test("planChunks covers the file exactly, the last chunk shorter", () => {
  assertEquals(planChunks(10, 4), [
    { index: 0, start: 0, end: 4 },
    { index: 1, start: 4, end: 8 },
    { index: 2, start: 8, end: 10 },
  ]);
  assertEquals(planChunks(8, 4).length, 2);
  assertEquals(planChunks(0, 4), []);
  assertThrows(() => planChunks(10, 0), RangeError);
});

Deno.test("parseRecord reads the chunks a record names", () => {
  const text = recordHeader(10, 4) + recordLine(2) + recordLine(0);
  assertEquals([...parseRecord(text, 10, 4)!].sort(), [0, 2]);
  assertEquals(parseRecord(recordHeader(10, 4), 10, 4)!.size, 0);
});

Deno.test("a torn record counts for nothing where it is torn", () => {
  const header = recordHeader(100, 10);
  // The last line lost its newline: chunk 3 may not be complete, so it is not trusted.
  assertEquals([...parseRecord(header + "1\n3", 100, 10)!], [1]);
  // Garbage and out-of-range numbers are skipped.
  assertEquals([...parseRecord(header + "x\n99\n2\n\n", 100, 10)!], [2]);
  // A torn header, another size or another chunk size: nothing is trusted.
  assertEquals(parseRecord(header.slice(0, 12), 100, 10), null);
  assertEquals(parseRecord(recordHeader(101, 10) + "1\n", 100, 10), null);
  assertEquals(parseRecord(recordHeader(100, 20) + "1\n", 100, 10), null);
  assertEquals(parseRecord(null, 100, 10), null);
});
