/**
 * The network-namespace lab on this machine's kernel: real namespaces, veths
 * and bridges, real HTTP between hosts. Ignored, with the reason printed,
 * where {@link netnsAvailable} says the machine cannot (not root, no `ip`).
 *
 * What is left after a lab closes is checked here with `ip` directly, not
 * through the lab's own leftover check.
 */
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../assert.ts";
import { isAlive } from "../proc_probe.ts";
import { until } from "../until.ts";
import { type CommandResult, runBounded } from "./bounded_command.ts";
import {
  Lab,
  LabError,
  type LabHost,
  type LabProcess,
  MGMT,
  netnsAvailable,
  sweepStaleLabs,
} from "./lab.ts";
import { labPrefix, MAX_SERIAL } from "./lab_names.ts";

const netns = await netnsAvailable();
const ignore = !netns.ok;
if (!netns.ok) console.warn(`tests/hosts/lab_test.ts ignored: ${netns.reason}`);

const DENO = Deno.execPath();
const SERVER = new URL("./hello_server.ts", import.meta.url).pathname;
const PROBE = new URL("./fetch_probe.ts", import.meta.url).pathname;
/** How long one HTTP probe waits for an answer: the bound on "B cannot reach A". */
const PROBE_MS = 1500;
/** Deno's start-up on a loaded machine, on top of the probe. */
const RUN_MS = PROBE_MS + 20_000;
const PORT = "8080";

function probeArgs(url: string): string[] {
  return ["run", "--allow-net", PROBE, url, String(PROBE_MS)];
}

/** GET `url` from `host`: "200 BODY" when answered. */
async function fetchFrom(host: LabHost, url: string): Promise<CommandResult> {
  return await host.run(DENO, probeArgs(url), { timeoutMs: RUN_MS });
}

function assertNoResponse(r: CommandResult, what: string): void {
  assertEquals(r.code, 1, `${what}: ${r.stdout}${r.stderr}`);
  assertStringIncludes(r.stdout, "no response", what);
}

/** Starts hello_server.ts on `host`, listening on `address`, and waits until it says so. */
async function serve(host: LabHost, address: string, text: string): Promise<LabProcess> {
  const server = await host.spawn(DENO, ["run", "--allow-net", SERVER, address, PORT, text]);
  await until(`${host.name}'s server to listen`, async () => {
    if (server.exited) throw new Error(`it exited: ${await server.readLog()}`);
    return (await server.readLog()).includes("listening on");
  }, { timeoutMs: 30_000, describe: () => `pid ${server.pid}, log ${server.log}` });
  return server;
}

/** Lines of `ip netns list` and `ip -o link` (root namespace) that name `prefix`. */
async function traces(prefix: string): Promise<string[]> {
  const out: string[] = [];
  for (const args of [["netns", "list"], ["-o", "link", "show"]]) {
    const r = await runBounded("ip", args);
    assertOk(r.success, `ip ${args.join(" ")}: ${r.stderr}`);
    out.push(...r.stdout.split("\n").filter((l) => l.includes(prefix)));
  }
  return out;
}

async function assertGone(prefix: string, processes: readonly LabProcess[]): Promise<void> {
  assertOk(prefix.startsWith("lg"), `prefix ${prefix}`);
  assertEquals(await traces(prefix), []);
  for (const p of processes) {
    assertOk(p.exited, `pid ${p.pid} (${p.command.join(" ")}) was not reaped`);
    assertOk(!isAlive(p.pid), `pid ${p.pid} (${p.command.join(" ")}) is alive`);
  }
}

Deno.test({
  name:
    "lab: B reaches A's server over mgmt, the root namespace cannot, a downed link cuts B off until it is up",
  ignore,
  fn: async () => {
    let prefix = "";
    let processes: LabProcess[] = [];
    {
      await using lab = await Lab.create({ name: "two-hosts" });
      prefix = lab.prefix;
      const a = await lab.host("a");
      const b = await lab.host("b");
      assertEquals(a.networks, [MGMT]);
      assertOk(a.address() !== b.address(), `${a.address()} twice`);
      const url = `http://${a.address()}:${PORT}/`;
      const hello = `hello from a ${crypto.randomUUID()}`;
      const server = await serve(a, a.address(), hello);

      // `ip netns exec` execs: the pid is the server's own, and it sits in a's namespace.
      assertEquals(Deno.readTextFileSync(`/proc/${server.pid}/comm`).trim(), "deno");
      assertEquals(
        Deno.readLinkSync(`/proc/${server.pid}/ns/net`),
        `net:[${Deno.statSync(`/run/netns/${a.netns}`).ino}]`,
      );

      const answered = await fetchFrom(b, url);
      assertEquals(answered.stdout.trim(), `200 ${hello}`, answered.stderr);

      // The root namespace sends it to its default gateway, which may well answer (this
      // machine's does, 404): what must not come back is a's token.
      const fromRoot = await runBounded(DENO, probeArgs(url), { timeoutMs: RUN_MS });
      assertOk(
        !fromRoot.stdout.includes(hello),
        `the root namespace reached a: ${fromRoot.stdout}`,
      );

      await lab.linkDown(a);
      assertNoResponse(await fetchFrom(b, url), "b fetching from a while a's link is down");
      await lab.linkUp(a);
      const back = await until("b to reach a after linkUp", async () => {
        const r = await fetchFrom(b, url);
        return r.success && r.stdout.trim();
      }, { timeoutMs: 30_000 });
      assertEquals(back, `200 ${hello}`);

      await lab.flap(a, MGMT, { times: 3, downMs: 50, upMs: 50 });
      const afterFlap = await until("b to reach a after a flap", async () => {
        const r = await fetchFrom(b, url);
        return r.success && r.stdout.trim();
      }, { timeoutMs: 30_000 });
      assertEquals(afterFlap, `200 ${hello}`);

      await assertRejects(() => lab.host("a"), LabError, "it has one by that name");
      await assertRejects(() => lab.linkDown(a, "fabric"), LabError, "it joined only mgmt");
      processes = lab.processes;
      assertEquals(processes.map((p) => p.pid), [server.pid]);
    }
    await assertGone(prefix, processes);
  },
});

Deno.test({
  name: "lab: a fabric joined by A and B only is a second interface C has no way to",
  ignore,
  fn: async () => {
    let prefix = "";
    let processes: LabProcess[] = [];
    {
      await using lab = await Lab.create({ name: "fabric" });
      prefix = lab.prefix;
      const a = await lab.host("a", { networks: ["fabric"] });
      const b = await lab.host("b", { networks: ["fabric"] });
      const c = await lab.host("c");
      assertOk((await lab.subnet("fabric")) !== (await lab.subnet(MGMT)));
      assertEquals(a.networks, [MGMT, "fabric"]);
      assertEquals(c.networks, [MGMT]);

      const links = async (h: LabHost) => {
        const r = await h.run("ip", ["-j", "-4", "addr", "show"]);
        assertOk(r.success, r.stderr);
        return (JSON.parse(r.stdout) as { ifname: string; addr_info: { local: string }[] }[])
          .map((l) => [l.ifname, l.addr_info.map((i) => i.local)]);
      };
      assertEquals(await links(a), [
        ["lo", ["127.0.0.1"]],
        [a.ifname.mgmt, [a.address()]],
        [a.ifname.fabric, [a.address("fabric")]],
      ]);
      assertEquals(await links(c), [["lo", ["127.0.0.1"]], [c.ifname.mgmt, [c.address()]]]);

      // Listening on every address: what C cannot reach is the network, not a closed port.
      const hello = `hello from a ${crypto.randomUUID()}`;
      await serve(a, "0.0.0.0", hello);
      const overFabric = `http://${a.address("fabric")}:${PORT}/`;
      assertEquals((await fetchFrom(b, overFabric)).stdout.trim(), `200 ${hello}`);
      assertEquals(
        (await fetchFrom(c, `http://${a.address()}:${PORT}/`)).stdout.trim(),
        `200 ${hello}`,
      );
      assertNoResponse(await fetchFrom(c, overFabric), "c fetching a's fabric address");

      await lab.linkDown(a, "fabric");
      assertNoResponse(await fetchFrom(b, overFabric), "b over the fabric while a's is down");
      assertEquals(
        (await fetchFrom(b, `http://${a.address()}:${PORT}/`)).stdout.trim(),
        `200 ${hello}`,
        "mgmt stays up when the fabric link is down",
      );
      processes = lab.processes;
    }
    await assertGone(prefix, processes);
  },
});

Deno.test({
  name: "lab: an error in the body still kills its processes, their children and its namespaces",
  ignore,
  fn: async () => {
    let prefix = "";
    let processes: LabProcess[] = [];
    let orphan = 0;
    let stubborn: LabProcess | undefined;
    let closed: Lab | undefined;
    await assertRejects(
      async () => {
        // termGraceMs short: the stubborn process ignores SIGTERM, so SIGKILL must follow.
        await using lab = await Lab.create({ name: "boom", termGraceMs: 300 });
        closed = lab;
        prefix = lab.prefix;
        const a = await lab.host("a");
        await lab.host("b", { networks: ["fabric"] });
        stubborn = await a.spawn("sh", [
          "-c",
          "trap '' TERM; echo ready; while :; do sleep 1; done",
        ]);
        // The shell dies on SIGTERM; its background sleep is an orphan the lab never tracked.
        const parent = await a.spawn("sh", ["-c", "sleep 600 & echo $!; wait"]);
        orphan = await until("the orphan-to-be to print its pid", async () => {
          const m = /^(\d+)$/m.exec(await parent.readLog());
          return m !== null && Number(m[1]);
        });
        await until(
          "the stubborn shell to start",
          async () => (await stubborn!.readLog()).includes("ready"),
        );
        processes = lab.processes;
        throw new Error("boom in the lab body");
      },
      Error,
      "boom in the lab body",
    );
    await assertGone(prefix, processes);
    assertOk(orphan > 0 && !isAlive(orphan), `the orphan ${orphan} is alive`);
    assertEquals((await stubborn!.status).signal, "SIGKILL");
    await assertRejects(() => closed!.host("c"), LabError, `lab ${prefix} is closed`);
  },
});

Deno.test({
  name: "a lab skips a prefix another test file of this process holds (parallel workers)",
  ignore,
  fn: async () => {
    // Parallel test files are workers of one process, each counting serials
    // from 0: a namespace another worker made at this worker's next serial
    // stands for that worker's lab.
    let held = "";
    try {
      await using first = await Lab.create({ name: "first" });
      const serial = parseInt(first.prefix.split("-")[1], 36);
      held = `${labPrefix(Deno.pid, serial + 1)}-switch`;
      const add = await runBounded("ip", ["netns", "add", held]);
      assertOk(add.success, add.stderr);
      await using second = await Lab.create({ name: "second" });
      assertEquals(second.prefix, labPrefix(Deno.pid, serial + 2));
      assertOk((await second.host("a")).name === "a");
    } finally {
      if (held !== "") await runBounded("ip", ["netns", "del", held]);
    }
  },
});

Deno.test({
  name: "sweepStaleLabs removes a dead process's namespaces and keeps a live one's",
  ignore,
  fn: async () => {
    // A pid that certainly belonged to a process that is gone: one we ran and reaped.
    const child = new Deno.Command("true", { stdout: "null" }).spawn();
    await child.status;
    const deadPid = child.pid;
    const dead = `${labPrefix(deadPid, 0)}-a`;
    const mine = `${labPrefix(Deno.pid, MAX_SERIAL)}-a`;
    try {
      for (const ns of [dead, mine]) {
        const r = await runBounded("ip", ["netns", "add", ns]);
        assertOk(r.success, r.stderr);
      }
      const report = await sweepStaleLabs();
      assertOk(report.removed.includes(`namespace ${dead}`), JSON.stringify(report));
      assertOk(!report.removed.includes(`namespace ${mine}`), JSON.stringify(report));
      assertEquals(await traces(dead), []);
      assertEquals((await traces(mine)).length, 1);
      await assertRejects(
        () => sweepStaleLabs(/^lg([0-9a-z]+)-/),
        LabError,
        `no group named "pid"`,
      );
    } finally {
      for (const ns of [dead, mine]) await runBounded("ip", ["netns", "del", ns]);
    }
  },
});
