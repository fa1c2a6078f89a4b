import { assertEquals, assertOk } from "../tests/assert.ts";
import { groupMembers, isRunning, parseProcStat, readCmdline, readProcStat } from "./proc.ts";

Deno.test("parseProcStat handles commands with spaces and parentheses", () => {
  const text =
    "4242 (VLLM::Worker (TP0)) S 4200 4200 4200 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 987654 1000 50 18446744073709551615";
  const s = parseProcStat(text)!;
  assertEquals([s.pid, s.comm, s.state, s.ppid, s.pgid, s.sid, s.startTime], [
    4242,
    "VLLM::Worker (TP0)",
    "S",
    4200,
    4200,
    4200,
    987654,
  ]);
  assertEquals(parseProcStat("garbage"), null);
});

Deno.test("readProcStat, readCmdline, isRunning and groupMembers see a real process group", async () => {
  const child = new Deno.Command("sleep", {
    args: ["30"],
    detached: true,
    stdout: "null",
    stderr: "null",
  })
    .spawn();
  try {
    const s = readProcStat(child.pid)!;
    assertEquals(s.pgid, child.pid);
    const cmdline = readCmdline(child.pid)!;
    assertOk(cmdline[0].endsWith("sleep") && cmdline[1] === "30", cmdline.join(" "));
    assertOk(isRunning(child.pid, s.startTime));
    assertOk(!isRunning(child.pid, s.startTime + 1), "another start time is another process");
    assertEquals(groupMembers(child.pid), [child.pid]);
  } finally {
    Deno.kill(-child.pid, "SIGKILL");
    await child.status;
  }
  assertOk(!isRunning(child.pid));
  assertEquals(groupMembers(child.pid), []);
});
