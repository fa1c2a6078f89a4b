import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { engineLeftReport, scanEnginesLeft } from "./dev_engines_left.ts";

const RANGE = { from: 7270, to: 8069 };

Deno.test("engineLeftReport: nothing found prints nothing", () => {
  assertEquals(engineLeftReport({ adoptable: [], foreign: [] }, RANGE), "");
});

Deno.test("engineLeftReport: adopted engines are named by node, pid and port", () => {
  const text = engineLeftReport({
    adoptable: [{ node: "h100-a", pid: 5101, port: 7270 }, {
      node: "l40s-a",
      pid: 5202,
      port: 7870,
    }],
    foreign: [],
  }, RANGE);
  assertEquals(
    text,
    "llmgw dev: 2 engine(s) left running by an earlier dev on this directory; its agents adopt " +
      "them: h100-a pid 5101 port 7270, l40s-a pid 5202 port 7870\n",
  );
});

Deno.test("engineLeftReport: foreign listeners are named with their command and the kill that stops their groups", () => {
  const text = engineLeftReport({
    adoptable: [],
    foreign: [
      { port: 7480, pid: 6001, pgid: 6001, cmdline: ["deno", "run", "fake_engine.ts", "vllm"] },
      { port: 7270, pid: 6000, pgid: 6000, cmdline: ["vllm", "serve", "m"] },
      { port: 7271, pid: 6002, pgid: 6000, cmdline: [] },
      { port: 7300, pid: null, pgid: null, cmdline: [] },
    ],
  }, RANGE);
  const lines = text.split("\n");
  assertEquals(
    lines[0],
    "llmgw dev: warning: 4 listener(s) it did not start in its engine ports 7270…8069 " +
      "(its agents skip those ports):",
  );
  // By port, each with its holder.
  assertEquals(lines.slice(1, 5), [
    "  port 7270: pid 6000 (vllm serve m)",
    "  port 7271: pid 6002",
    "  port 7300: a process /proc does not show (another user's?)",
    "  port 7480: pid 6001 (deno run fake_engine.ts vllm)",
  ]);
  assertStringIncludes(lines[5], "stop them with: kill -- -6000 -6001");
});

Deno.test("engineLeftReport: past ten listeners the rest are counted, and an unreadable /proc is said", () => {
  const foreign = Array.from({ length: 13 }, (_, i) => ({
    port: 7300 + i,
    pid: 100 + i,
    pgid: 100 + i,
    cmdline: [],
  }));
  const text = engineLeftReport(
    { adoptable: [], foreign, unknown: "Cannot read /proc/net/tcp" },
    RANGE,
  );
  assertEquals(text.split("\n").filter((l) => l.startsWith("  port ")).length, 10);
  assertStringIncludes(text, "  … and 3 more\n");
  assertStringIncludes(
    text,
    "llmgw dev: warning: cannot check its engine ports for engines it did not start: " +
      "Cannot read /proc/net/tcp\n",
  );
});

Deno.test("scanEnginesLeft: a listener in the range that no pid file names is foreign; one outside is not", () => {
  const root = Deno.makeTempDirSync({ prefix: "llmgw-dev-left-" });
  try {
    const proc = join(root, "proc");
    Deno.mkdirSync(join(proc, "net"), { recursive: true });
    // 127.0.0.1:7270 (0x1C66) and :9000 (0x2328) listening, inodes 111 and 222.
    Deno.writeTextFileSync(
      join(proc, "net", "tcp"),
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
        "   0: 0100007F:1C66 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n" +
        "   1: 0100007F:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0\n",
    );
    Deno.mkdirSync(join(proc, "4242", "fd"), { recursive: true });
    Deno.symlinkSync("socket:[111]", join(proc, "4242", "fd", "3"));
    Deno.writeTextFileSync(join(proc, "4242", "cmdline"), "vllm\0serve\0m\0");
    const found = scanEnginesLeft(join(root, "dev"), ["h100-a"], RANGE, proc);
    assertEquals(found.adoptable, []);
    assertEquals(found.foreign.map((f) => [f.port, f.pid, f.cmdline]), [[7270, 4242, [
      "vllm",
      "serve",
      "m",
    ]]]);
    assertOk(found.unknown === undefined);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("scanEnginesLeft: an unreadable /proc/net/tcp is unknown, never a throw", () => {
  const found = scanEnginesLeft("/nonexistent-dev-dir", ["h100-a"], RANGE, "/nonexistent-proc");
  assertEquals(found.foreign, []);
  assertStringIncludes(found.unknown ?? "", "Cannot read /nonexistent-proc/net/tcp");
});
