import fc from "fast-check";
import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import {
  describeHolders,
  listenersOn,
  parseProcNetTcp,
  parseSocketLink,
  portHolders,
  portOwnership,
  ProcNetError,
  socketInodesOf,
} from "./listen_owner.ts";
import { groupMembers } from "./proc.ts";

// Recorded on a Linux 6.18 x86-64 host with Deno listeners open on 127.0.0.1:36553 and
// 0.0.0.0:35919 (the 0.0.0.0:2024 listener was the host's own), then with a connection
// 127.0.0.1:41174 → 127.0.0.1:34573 established (state 01 lines).
const TCP =
  `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1521 1 00000000be9a329c 100 0 0 10 0                      
   1: 00000000:8C4F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 74843 1 00000000a1838026 100 0 0 10 0                     
   2: 0100007F:8EC9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 74842 1 0000000023c0d5d4 100 0 0 10 0                     
   3: 0100007F:870D 0100007F:A0D6 01 00000000:00000000 00:00000000 00000000     0        0 74909 1 000000007011e76a 20 0 0 10 -1                     
   4: 0100007F:A0D6 0100007F:870D 01 00000000:00000000 00:00000000 00000000     0        0 74908 2 0000000023c0d5d4 20 0 0 10 -1                     
`;

// Recorded on the same host with listeners on [::ffff:127.0.0.1]:44189, [::1]:39715, [::]:42619,
// [fd00::2]:38179 and [fe80::fc:ff:fe00:1%eth0]:43497, and a connection on ::1 (state 01).
const TCP6 =
  `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:AC9D 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 74846 1 000000000157be45 100 0 0 10 0
   1: 00000000000000000000000001000000:9B23 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 74845 1 000000001529549c 100 0 0 10 0
   2: 00000000000000000000000000000000:A67B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 74844 1 000000001a996e16 100 0 0 10 0
   3: 000000FD000000000000000002000000:9523 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 75578 1 000000000157be45 100 0 0 10 0
   4: 000080FE00000000FF00FC00010000FE:A9E9 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 75580 1 000000001a996e16 100 0 0 10 0
   5: 00000000000000000000000001000000:DA1A 00000000000000000000000001000000:806B 01 00000000:00000000 00:00000000 00000000     0        0 74911 2 000000001529549c 20 0 0 10 -1
`;

Deno.test("parseProcNetTcp: recorded /proc/net/tcp gives its LISTEN sockets only", () => {
  assertEquals(parseProcNetTcp(TCP), [
    { address: "0.0.0.0", port: 2024, inode: 1521, family: 4 },
    { address: "0.0.0.0", port: 35919, inode: 74843, family: 4 },
    { address: "127.0.0.1", port: 36553, inode: 74842, family: 4 },
  ]);
});

Deno.test("parseProcNetTcp: recorded /proc/net/tcp6 decodes every address form", () => {
  assertEquals(parseProcNetTcp(TCP6), [
    { address: "::ffff:127.0.0.1", port: 44189, inode: 74846, family: 6 },
    { address: "::1", port: 39715, inode: 74845, family: 6 },
    { address: "::", port: 42619, inode: 74844, family: 6 },
    { address: "fd00::2", port: 38179, inode: 75578, family: 6 },
    { address: "fe80::fc:ff:fe00:1", port: 43497, inode: 75580, family: 6 },
  ]);
});

Deno.test("parseProcNetTcp: malformed lines are skipped, never thrown on", () => {
  const good =
    "   9: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 555 1";
  const cases: [string, string][] = [
    ["empty text", ""],
    ["header only", TCP.split("\n")[0]],
    ["truncated line", "   0: 0100007F:1F40 00000000:0000 0A"],
    ["no slot number", good.replace("9:", "x:")],
    ["address of odd length", good.replace("0100007F", "100007F")],
    ["address not hex", good.replace("0100007F", "0100007G")],
    ["port too short", good.replace(":1F40", ":F40")],
    ["inode not a number", good.replace(" 555 ", " 5x5 ")],
    ["inode past safe integers", good.replace(" 555 ", " 99999999999999999999 ")],
    ["binary garbage", "\u0000\u0001:\uFFFD 0A 0A 0A 0A 0A 0A 0A 0A 0A"],
  ];
  for (const [what, text] of cases) assertEquals(parseProcNetTcp(text), [], what);
  // The good line itself parses, so each case above fails for its own reason.
  assertEquals(parseProcNetTcp(good), [{
    address: "127.0.0.1",
    port: 8000,
    inode: 555,
    family: 4,
  }]);
  assertEquals(parseProcNetTcp(`garbage\n${good}\n   1: nonsense`).length, 1);
});

/** A tcp or tcp6 line as the kernel prints it, from an address's bytes. */
function kernelLine(bytes: number[], port: number, inode: number, state = "0A"): string {
  let hex = "";
  for (let w = 0; w < bytes.length; w += 4) {
    for (let b = 3; b >= 0; b--) hex += bytes[w + b].toString(16).padStart(2, "0").toUpperCase();
  }
  const zero = "0".repeat(hex.length);
  const p = port.toString(16).padStart(4, "0").toUpperCase();
  return `   0: ${hex}:${p} ${zero}:0000 ${state} 00000000:00000000 00:00000000 00000000  0  0 ${inode} 1`;
}

Deno.test("parseProcNetTcp: IPv6 text is canonical (RFC 5952), as the URL parser writes it", () => {
  const group = fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
  fc.assert(
    fc.property(
      fc.array(group, { minLength: 8, maxLength: 8 }),
      fc.integer({ min: 0, max: 65535 }),
      (groups, port) => {
        const bytes = groups.flatMap((g) => [g >> 8, g & 0xff]);
        const [socket] = parseProcNetTcp(kernelLine(bytes, port, 7));
        const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
        const expected = mapped
          ? `::ffff:${bytes.slice(12).join(".")}`
          : new URL(`http://[${groups.map((g) => g.toString(16)).join(":")}]/`).hostname
            .slice(1, -1);
        assertEquals(socket, { address: expected, port, inode: 7, family: 6 });
      },
    ),
  );
});

Deno.test("parseProcNetTcp: IPv4 addresses and ports survive the kernel's byte order", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 }),
      fc.integer({ min: 0, max: 65535 }),
      fc.integer({ min: 1, max: 2 ** 32 }),
      fc.constantFrom("01", "06", "0A"),
      (bytes, port, inode, state) => {
        const parsed = parseProcNetTcp(kernelLine(bytes, port, inode, state));
        assertEquals(
          parsed,
          state === "0A" ? [{ address: bytes.join("."), port, inode, family: 4 }] : [],
        );
      },
    ),
  );
});

Deno.test("parseSocketLink reads socket:[N] and nothing else", () => {
  const cases: [string, number | null][] = [
    ["socket:[12345]", 12345],
    ["socket:[0]", 0],
    ["pipe:[73883]", null],
    ["anon_inode:[eventpoll]", null],
    ["/dev/null", null],
    ["socket:[]", null],
    ["socket:[12a]", null],
    ["socket:[99999999999999999999]", null],
    [" socket:[1]", null],
    ["", null],
  ];
  for (const [target, want] of cases) assertEquals(parseSocketLink(target), want, target);
});

/** A process in a fake /proc tree. */
interface FakeProc {
  pid: number;
  cmdline?: string[];
  /** fd number → link target. */
  fds?: Record<string, string>;
}

/** Builds a fake /proc under a temp dir; `tcp`/`tcp6` null leave the file out. */
function fakeProc(
  opts: { tcp: string | null; tcp6?: string | null; procs?: FakeProc[] },
): string {
  const root = Deno.makeTempDirSync({ prefix: "llmgw-proc-" });
  Deno.mkdirSync(`${root}/net`);
  if (opts.tcp !== null) Deno.writeTextFileSync(`${root}/net/tcp`, opts.tcp);
  if (opts.tcp6 !== null && opts.tcp6 !== undefined) {
    Deno.writeTextFileSync(`${root}/net/tcp6`, opts.tcp6);
  }
  for (const p of opts.procs ?? []) {
    Deno.mkdirSync(`${root}/${p.pid}/fd`, { recursive: true });
    if (p.cmdline !== undefined) {
      Deno.writeTextFileSync(`${root}/${p.pid}/cmdline`, p.cmdline.map((a) => `${a}\0`).join(""));
    }
    for (const [fd, target] of Object.entries(p.fds ?? {})) {
      Deno.symlinkSync(target, `${root}/${p.pid}/fd/${fd}`);
    }
  }
  return root;
}

function withFakeProc(opts: Parameters<typeof fakeProc>[0], fn: (root: string) => void): void {
  const root = fakeProc(opts);
  try {
    fn(root);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

const V4_LOOP = [127, 0, 0, 1];
const V4_ANY = [0, 0, 0, 0];
const V6_ANY = new Array(16).fill(0);

Deno.test("listenersOn reads tcp and tcp6 for one port; a kernel without tcp6 is fine", () => {
  const tcp = `header\n${kernelLine(V4_LOOP, 8000, 11)}\n${kernelLine(V4_ANY, 8001, 12)}\n`;
  const tcp6 = `header\n${kernelLine(V6_ANY, 8000, 13)}\n`;
  withFakeProc({ tcp, tcp6 }, (root) => {
    assertEquals(listenersOn(8000, root).map((s) => [s.address, s.inode]), [
      ["127.0.0.1", 11],
      ["::", 13],
    ]);
    assertEquals(listenersOn(9000, root), []);
  });
  withFakeProc({ tcp, tcp6: null }, (root) => {
    assertEquals(listenersOn(8000, root).map((s) => s.inode), [11]);
  });
  withFakeProc({ tcp: null, tcp6 }, (root) => {
    assertThrows(() => listenersOn(8000, root), ProcNetError, `Cannot read ${root}/net/tcp`);
  });
});

Deno.test("socketInodesOf keeps socket links, and a missing process holds nothing", () => {
  const procs: FakeProc[] = [{
    pid: 100,
    fds: { "0": "/dev/null", "3": "socket:[11]", "4": "pipe:[9]", "5": "socket:[12]" },
  }];
  withFakeProc({ tcp: "", procs }, (root) => {
    assertEquals(socketInodesOf(100, root), new Set([11, 12]));
    assertEquals(socketInodesOf(101, root), new Set());
  });
});

Deno.test("portHolders names one holder per socket, unknown when no process shows it", () => {
  const tcp = `h\n${kernelLine(V4_LOOP, 8000, 11)}\n${kernelLine(V4_ANY, 8001, 21)}\n`;
  const tcp6 = `h\n${kernelLine(V6_ANY, 8000, 12)}\n`;
  const procs: FakeProc[] = [
    { pid: 50, cmdline: ["sshd"], fds: { "3": "socket:[99]" } },
    { pid: 100, cmdline: ["vllm", "serve", "m"], fds: { "3": "socket:[11]" } },
    // A forked child sharing its parent's socket: not looked for once the parent is found.
    { pid: 101, cmdline: ["vllm-worker"], fds: { "3": "socket:[11]" } },
    { pid: 200, cmdline: ["other"], fds: { "7": "socket:[12]" } },
  ];
  withFakeProc({ tcp, tcp6, procs }, (root) => {
    assertEquals(portHolders(8000, root), [
      { pid: 100, cmdline: ["vllm", "serve", "m"] },
      { pid: 200, cmdline: ["other"] },
    ]);
    assertEquals(portHolders(8001, root), [{ pid: null, cmdline: [] }]);
    assertEquals(portHolders(8002, root), []);
    // Past the scan limit, what was not reached is unknown rather than absent.
    assertEquals(portHolders(8000, root, 2), [
      { pid: 100, cmdline: ["vllm", "serve", "m"] },
      { pid: null, cmdline: [] },
    ]);
  });
});

Deno.test("portOwnership: each kind, from a fake /proc", () => {
  const tcp = [
    "h",
    kernelLine(V4_LOOP, 8000, 11), // ours alone
    kernelLine(V4_ANY, 8001, 21), // a stranger's
    kernelLine(V4_ANY, 8002, 31), // ours, and a SO_REUSEPORT stranger's next to it
    kernelLine(V4_ANY, 8002, 32),
    kernelLine(V4_ANY, 8003, 41), // ours, shared with a process outside the group
    kernelLine(V4_ANY, 8004, 51), // nobody readable holds it
  ].join("\n");
  const procs: FakeProc[] = [
    { pid: 100, cmdline: ["engine"], fds: { "3": "socket:[11]", "4": "socket:[31]" } },
    { pid: 101, cmdline: ["engine-worker"], fds: { "3": "socket:[41]" } },
    { pid: 300, cmdline: ["python3", "-m", "http.server", "8001"], fds: { "5": "socket:[21]" } },
    { pid: 301, cmdline: ["intruder"], fds: { "5": "socket:[32]" } },
    { pid: 302, cmdline: ["escaped-child"], fds: { "3": "socket:[41]" } },
  ];
  withFakeProc({ tcp, procs }, (root) => {
    const group = [100, 101];
    assertEquals(portOwnership(8000, group, root), { kind: "ours", pid: 100 });
    assertEquals(portOwnership(8001, group, root), {
      kind: "foreign",
      holders: [{ pid: 300, cmdline: ["python3", "-m", "http.server", "8001"] }],
      ours: null,
    });
    assertEquals(portOwnership(8002, group, root), {
      kind: "foreign",
      holders: [{ pid: 301, cmdline: ["intruder"] }],
      ours: 100,
    });
    assertEquals(portOwnership(8003, group, root), { kind: "ours", pid: 101 });
    assertEquals(portOwnership(8004, group, root), {
      kind: "foreign",
      holders: [{ pid: null, cmdline: [] }],
      ours: null,
    });
    assertEquals(portOwnership(8005, group, root), { kind: "none" });
    // A group whose members are gone owns nothing.
    assertEquals(portOwnership(8000, [7777], root), {
      kind: "foreign",
      holders: [{ pid: 100, cmdline: ["engine"] }],
      ours: null,
    });
  });
  withFakeProc({ tcp: null }, (root) => {
    const got = portOwnership(8000, [100], root);
    assertOk(got.kind === "unknown", JSON.stringify(got));
    assertStringIncludes(got.reason, `Cannot read ${root}/net/tcp`);
  });
});

Deno.test("describeHolders names pids and command lines for an event", () => {
  assertEquals(
    describeHolders([{ pid: 42, cmdline: ["vllm", "serve", "m"] }, { pid: 43, cmdline: [] }]),
    "pid 42 (vllm serve m), pid 43",
  );
  assertStringIncludes(describeHolders([{ pid: null, cmdline: [] }]), "does not show");
  assertEquals(describeHolders([]), "nobody");
  const long = describeHolders([{ pid: 1, cmdline: ["x".repeat(500)] }]);
  assertOk(long.length < 220, long);
  // Another shard's engine that takes its key in argv: the key is not repeated in an event.
  assertEquals(
    describeHolders([{ pid: 44, cmdline: ["sglang", "--api-key", "k-secret", "--port", "1"] }]),
    "pid 44 (sglang --api-key *** --port 1)",
  );
});

Deno.test("portOwnership on the real /proc: this process's listener, then a closed port", () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  try {
    const [socket] = listenersOn(port);
    assertEquals([socket.address, socket.family], ["127.0.0.1", 4]);
    assertOk(socketInodesOf(Deno.pid).has(socket.inode));
    assertEquals(portOwnership(port, [Deno.pid]), { kind: "ours", pid: Deno.pid });
    const foreign = portOwnership(port, []);
    assertOk(foreign.kind === "foreign", JSON.stringify(foreign));
    assertEquals(foreign.holders.map((h) => h.pid), [Deno.pid]);
    assertOk(
      foreign.holders[0].cmdline.some((a) => a.includes("deno")),
      foreign.holders[0].cmdline.join(" "),
    );
  } finally {
    listener.close();
  }
  assertEquals(portOwnership(port, [Deno.pid]), { kind: "none" });
});

/** Reads a child's stdout up to its first newline. */
async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`child closed its output after ${JSON.stringify(text)}`);
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    reader.releaseLock();
  }
  return text.slice(0, text.indexOf("\n"));
}

Deno.test("portOwnership on the real /proc: a child process's listener is the child's", async () => {
  const script = `const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
console.log(l.addr.port);
for await (const c of l) c.close();`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  try {
    const port = Number(await firstLine(child.stdout));
    assertOk(Number.isInteger(port) && port > 0, `port ${port}`);
    assertEquals(portOwnership(port, [child.pid]), { kind: "ours", pid: child.pid });
    const seen = portOwnership(port, [Deno.pid]);
    assertOk(seen.kind === "foreign", JSON.stringify(seen));
    assertEquals(seen.holders.map((h) => h.pid), [child.pid]);
    assertEquals(seen.ours, null);
    assertOk(seen.holders[0].cmdline.includes("eval"), seen.holders[0].cmdline.join(" "));
    assertEquals(portHolders(port).map((h) => h.pid), [child.pid]);
  } finally {
    child.kill("SIGKILL");
    await child.stdout.cancel().catch(() => {});
    await child.status;
  }
});

const hasPython = new Deno.Command("python3", { args: ["-c", ""] }).outputSync().success;

Deno.test({
  name: "portOwnership on the real /proc: a forked child holding the port is the group's",
  ignore: !hasPython,
  fn: async () => {
    // The group leader binds, forks a child that keeps the socket, and exits: the group's
    // live members are then the child alone, as with an engine that forks its server.
    const script = `import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
if os.fork() == 0:
    print(s.getsockname()[1], flush=True)
    time.sleep(60)
else:
    os._exit(0)`;
    const child = new Deno.Command("python3", {
      args: ["-c", script],
      detached: true,
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const pgid = child.pid;
    try {
      const port = Number(await firstLine(child.stdout));
      await child.status; // the leader exits at once; its forked child keeps the socket
      const members = groupMembers(pgid);
      assertEquals(members.length, 1, `members ${members}`);
      assertOk(members[0] !== pgid);
      assertEquals(portOwnership(port, members), { kind: "ours", pid: members[0] });
      assertEquals(portOwnership(port, [pgid]).kind, "foreign");
    } finally {
      try {
        Deno.kill(-pgid, "SIGKILL");
      } catch {
        // The group is already gone.
      }
      await child.stdout.cancel().catch(() => {});
      await child.status;
    }
  },
});
