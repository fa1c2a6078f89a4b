/**
 * A network-namespace lab for multi-host tests (issue #14): each host is a
 * Linux network namespace, wired by veth pairs to bridges in a "switch"
 * namespace of the lab's own, so hosts talk over real TCP/IP on addresses of
 * their own while no packet leaves the lab.
 *
 * ```ts
 * await using lab = await Lab.create({ name: "smoke" });
 * const a = await lab.host("a", { networks: ["fabric"] });
 * const server = await a.spawn(Deno.execPath(), ["run", "--allow-net", "server.ts"]);
 * await lab.linkDown(a);            // a's cable pulled, on the switch side
 * ```
 *
 * Every host joins the management network {@link MGMT}; other networks (a
 * "fabric" for NCCL_SOCKET_IFNAME) are a second interface on the hosts that
 * name them. Each network is a private 10.A.B.0/24 that none of this
 * machine's routes covers. Names carry the lab's prefix (lab_names.ts), so
 * {@link Lab.close} can prove nothing of the lab is left and
 * {@link sweepStaleLabs} can remove what a crashed run left.
 *
 * Needs root and iproute2: {@link netnsAvailable} says whether this machine
 * can run a lab, and why not.
 *
 * @module
 */
import { type CommandResult, runBounded } from "./bounded_command.ts";
import {
  bridgeName,
  checkHostName,
  checkLabName,
  checkNetworkName,
  hostLinkName,
  hostNamespace,
  MAX_HOSTS,
  MAX_NETWORKS,
  switchLinkName,
  switchNamespace,
} from "./lab_names.ts";
import { endsWithin, LabProcess, type SpawnOptions } from "./lab_process.ts";
import {
  type Cidr,
  formatCidr,
  hostAddress,
  parseCidr,
  pickSubnet,
  routeDestinations,
} from "./subnet.ts";

export { LabProcess, type SpawnOptions } from "./lab_process.ts";
export type { CommandResult } from "./bounded_command.ts";
export {
  LabError,
  labLeftovers,
  type NetnsAvailability,
  netnsAvailable,
  type SweepReport,
  sweepStaleLabs,
} from "./netns.ts";
import {
  claimPrefix,
  emptyNamespace,
  ip,
  IP_TIMEOUT_MS,
  KILL_GRACE_MS,
  LabError,
  labLeftovers,
} from "./netns.ts";
import { errorMessage } from "../../text/error_message.ts";

/** The management network every host joins. */
export const MGMT = "mgmt";

/** Thrown by {@link Lab.close} when something of the lab could not be removed. */
export class LabCleanupError extends Error {
  override name = "LabCleanupError";
  constructor(
    /** The lab's prefix. */
    readonly prefix: string,
    /** What is left or went wrong, one line each. */
    readonly leftovers: readonly string[],
    /** The lab's log folder, kept for the post-mortem. */
    readonly logDir: string,
  ) {
    super(
      `Cannot clean up lab ${prefix}: ${leftovers.join("; ")} (logs kept in ${logDir})`,
    );
  }
}

/** Options of {@link Lab.create}. */
export interface LabOptions {
  /** A label for messages and the log folder: a lower-case letter then letters, digits, '-'. */
  name: string;
  /** Where processes log, kept after close (default: a temporary folder, removed on a clean close). */
  logDir?: string;
  /** Draws the subnets (default Math.random). */
  random?: () => number;
  /** How long a process gets after SIGTERM before SIGKILL at close (default 3000 ms). */
  termGraceMs?: number;
}

/** Options of {@link Lab.host}. */
export interface HostOptions {
  /** Networks besides {@link MGMT} to join, each as one more interface. */
  networks?: readonly string[];
}

/** Options of {@link LabHost.run}. */
export interface RunOptions {
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Working directory. */
  cwd?: string;
  /** Kill the command after this many milliseconds (default 10 000). */
  timeoutMs?: number;
}

/** Options of {@link Lab.flap}. */
export interface FlapOptions {
  /** How many down/up cycles (1…1000). */
  times: number;
  /** How long the link stays down each time, in milliseconds (0…60 000). */
  downMs: number;
  /** How long it stays up after each time, in milliseconds (0…60 000). */
  upMs: number;
}

const DRAIN_GRACE_MS = 2000;

interface Network {
  name: string;
  index: number;
  subnet: Cidr;
  bridge: string;
  members: number;
}

/** What a {@link LabHost} asks of its lab. */
interface HostBackend {
  spawn(
    host: LabHost,
    cmd: string,
    args: readonly string[],
    options: SpawnOptions,
  ): Promise<LabProcess>;
  run(host: LabHost, cmd: string, args: readonly string[], options: RunOptions): Promise<
    CommandResult
  >;
}

/** Subnets of this process's open labs: two labs never share one, even in separate switches. */
const subnetsInUse = new Set<string>();

/** A host of a {@link Lab}: one network namespace with an interface per network it joined. */
export class LabHost {
  #backend: HostBackend;

  /** @internal Made by {@link Lab.host}. */
  constructor(
    backend: HostBackend,
    /** Its name in the lab, e.g. "a". */
    readonly name: string,
    /** Its network namespace, for `ip netns exec`. */
    readonly netns: string,
    /** Its index in the lab, which its switch-side link names carry. */
    readonly index: number,
    /** Its IPv4 address on each network it joined, by network name. */
    readonly addresses: Readonly<Record<string, string>>,
    /** Its interface on each network it joined (in its namespace), by network name. */
    readonly ifname: Readonly<Record<string, string>>,
  ) {
    this.#backend = backend;
  }

  /** The networks it joined. */
  get networks(): string[] {
    return Object.keys(this.addresses);
  }

  /** Its address on `network` (default {@link MGMT}); throws when it did not join it. */
  address(network: string = MGMT): string {
    const a = this.addresses[network];
    if (a === undefined) {
      throw new LabError(
        `Cannot give host ${this.name}'s address on ${network}: it joined only ${
          this.networks.join(", ")
        }`,
      );
    }
    return a;
  }

  /**
   * Starts a long-running `cmd args` in this host's namespace, stdout and
   * stderr to `options.log` (default: a file in the lab's log folder). The
   * lab stops it at close.
   */
  spawn(
    cmd: string,
    args: readonly string[] = [],
    options: SpawnOptions = {},
  ): Promise<LabProcess> {
    return this.#backend.spawn(this, cmd, args, options);
  }

  /** Runs a short `cmd args` in this host's namespace, for at most `timeoutMs`. */
  run(cmd: string, args: readonly string[] = [], options: RunOptions = {}): Promise<CommandResult> {
    return this.#backend.run(this, cmd, args, options);
  }
}

/** A network-namespace lab; see the module doc. Close it with `await using` or {@link Lab.close}. */
export class Lab implements AsyncDisposable {
  /** Its log folder. */
  readonly logDir: string;
  #ownsLogDir: boolean;
  #random: () => number;
  #termGraceMs: number;
  #switchNs: string;
  #namespaces: string[] = [];
  #networks = new Map<string, Promise<Network>>();
  #networkCount = 0;
  #hosts = new Map<string, LabHost>();
  #hostCount = 0;
  #processes: LabProcess[] = [];
  #runs = new Set<Promise<unknown>>();
  #logCount = 0;
  #closing: Promise<void> | null = null;
  #backend: HostBackend;

  private constructor(
    /** Its label. */
    readonly name: string,
    /** The prefix of every namespace and link it makes. */
    readonly prefix: string,
    logDir: string,
    ownsLogDir: boolean,
    options: LabOptions,
  ) {
    this.logDir = logDir;
    this.#ownsLogDir = ownsLogDir;
    this.#random = options.random ?? Math.random;
    this.#termGraceMs = options.termGraceMs ?? 3000;
    this.#switchNs = switchNamespace(prefix);
    this.#backend = {
      spawn: (host, cmd, args, opts) => this.#spawn(host, cmd, args, opts),
      run: (host, cmd, args, opts) => this.#run(host, cmd, args, opts),
    };
  }

  /** Creates a lab: its switch namespace and the {@link MGMT} network. */
  static async create(options: LabOptions): Promise<Lab> {
    const name = checkLabName(options.name);
    const grace = options.termGraceMs ?? 3000;
    if (!Number.isFinite(grace) || grace < 0) {
      throw new LabError(`Cannot create lab ${name}: termGraceMs must be ≥ 0, got ${grace}`);
    }
    const { prefix, switchNs } = await claimPrefix();
    let logDir = options.logDir;
    try {
      if (logDir !== undefined) await Deno.mkdir(logDir, { recursive: true });
      logDir ??= await Deno.makeTempDir({ prefix: `${prefix}-${name}-` });
    } catch (e) {
      await ip(["netns", "del", switchNs], `delete namespace ${switchNs}`).catch(() => {});
      throw e;
    }
    const lab = new Lab(name, prefix, logDir, options.logDir === undefined, options);
    try {
      await lab.#addNamespace(switchNs, { claimed: true });
      await lab.#network(MGMT);
    } catch (e) {
      try {
        await lab.close();
      } catch (cleanup) {
        throw new LabError(`${errorMessage(e)}; then: ${errorMessage(cleanup)}`, { cause: e });
      }
      throw e;
    }
    return lab;
  }

  /** Its hosts, in the order they were added. */
  get hosts(): LabHost[] {
    return [...this.#hosts.values()];
  }

  /** Every process its hosts spawned, running or not. */
  get processes(): LabProcess[] {
    return [...this.#processes];
  }

  /** The namespaces it made (the switch's and one per host). */
  get namespaces(): string[] {
    return [...this.#namespaces];
  }

  /** The subnet of `network`, as `10.A.B.0/24`; throws for a network no host joined. */
  async subnet(network: string = MGMT): Promise<string> {
    const n = this.#networks.get(network);
    if (n === undefined) {
      throw new LabError(`Cannot give lab ${this.prefix}'s subnet ${network}: no such network`);
    }
    return formatCidr((await n).subnet);
  }

  /**
   * Adds host `name`: its namespace (loopback up), one veth to the switch per
   * network (always {@link MGMT}, plus `networks`), each with the network's
   * next address.
   */
  async host(name: string, options: HostOptions = {}): Promise<LabHost> {
    this.#open(`add host ${name}`);
    checkHostName(name);
    if (this.#hosts.has(name) || this.#namespaces.includes(hostNamespace(this.prefix, name))) {
      throw new LabError(`Cannot add host ${name} to lab ${this.prefix}: it has one by that name`);
    }
    const wanted = [...new Set([MGMT, ...(options.networks ?? [])])].map(checkNetworkName);
    if (this.#hostCount >= MAX_HOSTS) {
      throw new LabError(`Cannot add host ${name}: a lab holds at most ${MAX_HOSTS} hosts`);
    }
    const index = this.#hostCount++;
    const ns = hostNamespace(this.prefix, name);
    await this.#addNamespace(ns);
    const addresses: Record<string, string> = {};
    const ifnames: Record<string, string> = {};
    for (const netName of wanted) {
      const net = await this.#network(netName);
      const address = hostAddress(net.subnet, ++net.members);
      const hostSide = hostLinkName(this.prefix, net.index);
      const switchSide = switchLinkName(this.prefix, net.index, index);
      const what = `wire host ${name} to network ${netName}`;
      // Both ends are made in their namespaces: nothing of the lab ever sits in the root one.
      await ip(
        [
          "link",
          "add",
          hostSide,
          "netns",
          ns,
          "type",
          "veth",
          "peer",
          "name",
          switchSide,
          "netns",
          this.#switchNs,
        ],
        what,
      );
      await ip(["-n", this.#switchNs, "link", "set", switchSide, "master", net.bridge, "up"], what);
      await ip(["-n", ns, "addr", "add", `${address}/24`, "dev", hostSide], what);
      await ip(["-n", ns, "link", "set", hostSide, "up"], what);
      addresses[netName] = address;
      ifnames[netName] = hostSide;
    }
    const host = new LabHost(this.#backend, name, ns, index, addresses, ifnames);
    this.#hosts.set(name, host);
    return host;
  }

  /** Cuts `host` off `network` (default {@link MGMT}) as a pulled cable would: its switch port goes down. */
  async linkDown(host: LabHost | string, network: string = MGMT): Promise<void> {
    await this.#setSwitchPort(host, network, "down");
  }

  /** Undoes {@link Lab.linkDown}. */
  async linkUp(host: LabHost | string, network: string = MGMT): Promise<void> {
    await this.#setSwitchPort(host, network, "up");
  }

  /**
   * Takes `host`'s switch port on `network` down and up `times` times,
   * holding each state for `downMs`/`upMs`; the port is up when it returns or
   * throws.
   */
  async flap(host: LabHost | string, network: string, options: FlapOptions): Promise<void> {
    const { times, downMs, upMs } = options;
    if (!Number.isInteger(times) || times < 1 || times > 1000) {
      throw new LabError(`Cannot flap: times must be an integer in 1…1000, got ${times}`);
    }
    for (const [k, v] of [["downMs", downMs], ["upMs", upMs]] as const) {
      if (!Number.isFinite(v) || v < 0 || v > 60_000) {
        throw new LabError(`Cannot flap: ${k} must be in 0…60000 ms, got ${v}`);
      }
    }
    try {
      for (let i = 0; i < times; i++) {
        await this.linkDown(host, network);
        // The outage's length is the point of a flap, not a wait for a condition.
        await sleep(downMs);
        await this.linkUp(host, network);
        await sleep(upMs);
      }
    } finally {
      await this.linkUp(host, network);
    }
  }

  /**
   * Tears the lab down: SIGTERMs every process it spawned (SIGKILL after
   * `termGraceMs`), SIGKILLs anything else left in its namespaces, deletes
   * them (which removes their veths and bridges), and checks that no
   * namespace or link with its prefix is left. Every step runs even when one
   * fails; then it throws {@link LabCleanupError} listing what went wrong.
   * Calling it again returns the first call's promise.
   */
  close(): Promise<void> {
    return this.#closing ??= this.#close();
  }

  /** {@link Lab.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #close(): Promise<void> {
    const problems: string[] = [];
    const note = (e: unknown) => problems.push(errorMessage(e));
    const stopped = await Promise.all(
      this.#processes.map((p) => p.stop(this.#termGraceMs, KILL_GRACE_MS)),
    );
    this.#processes.forEach((p, i) => {
      if (!stopped[i]) {
        problems.push(`pid ${p.pid} (${p.command[0]}) on ${p.host} outlived SIGKILL`);
      }
    });
    // Hosts first: the switch runs nothing, and its bridges should outlive the veths.
    const made = [
      ...this.#namespaces.filter((n) => n !== this.#switchNs),
      ...this.#namespaces.filter((n) => n === this.#switchNs),
    ];
    for (const ns of made) {
      try {
        const left = await emptyNamespace(ns, KILL_GRACE_MS);
        if (left.length > 0) problems.push(`pids ${left.join(", ")} in ${ns} outlived SIGKILL`);
      } catch (e) {
        note(e);
      }
    }
    if (!(await endsWithin(Promise.all(this.#runs), IP_TIMEOUT_MS))) {
      problems.push(`${this.#runs.size} short command(s) did not end`);
    }
    for (const p of this.#processes) await p.closeLog(DRAIN_GRACE_MS).catch(note);
    for (const ns of made) {
      await ip(["netns", "del", ns], `delete namespace ${ns}`).catch(note);
    }
    try {
      problems.push(...(await labLeftovers(this.prefix)).map((l) => `${l} is left`));
    } catch (e) {
      note(e);
    }
    for (const p of this.#processes) {
      if (!p.exited) problems.push(`pid ${p.pid} (${p.command[0]}) on ${p.host} was not reaped`);
    }
    for (const n of this.#networks.values()) {
      await n.then((net) => subnetsInUse.delete(formatCidr(net.subnet)), () => {});
    }
    if (problems.length > 0) throw new LabCleanupError(this.prefix, problems, this.logDir);
    if (this.#ownsLogDir) await Deno.remove(this.logDir, { recursive: true });
  }

  #open(what: string): void {
    if (this.#closing !== null) throw new LabError(`Cannot ${what}: lab ${this.prefix} is closed`);
  }

  /** Creates `ns` (unless `claimed`: made already) as one of the lab's, loopback up. */
  async #addNamespace(ns: string, { claimed = false } = {}): Promise<void> {
    if (!claimed) await ip(["netns", "add", ns], `create namespace ${ns}`);
    this.#namespaces.push(ns);
    await ip(["-n", ns, "link", "set", "lo", "up"], `bring loopback up in ${ns}`);
  }

  /** Network `name`, its bridge made on first use. */
  #network(name: string): Promise<Network> {
    let net = this.#networks.get(name);
    if (net === undefined) {
      if (this.#networkCount >= MAX_NETWORKS) {
        throw new LabError(`Cannot add network ${name}: a lab holds at most ${MAX_NETWORKS}`);
      }
      net = this.#makeNetwork(name, this.#networkCount++);
      this.#networks.set(name, net);
    }
    return net;
  }

  async #makeNetwork(name: string, index: number): Promise<Network> {
    const routes = routeDestinations(
      await ip(["-j", "-4", "route", "show", "table", "all"], "read this machine's routes"),
    );
    // Picked and reserved with no await between: concurrent networks cannot draw the same one.
    const taken = [...routes, ...[...subnetsInUse].map(parseCidr)];
    const subnet = pickSubnet(taken, this.#random);
    subnetsInUse.add(formatCidr(subnet));
    const bridge = bridgeName(this.prefix, index);
    const what = `create network ${name}`;
    await ip(["-n", this.#switchNs, "link", "add", bridge, "type", "bridge"], what);
    await ip(["-n", this.#switchNs, "link", "set", bridge, "up"], what);
    return { name, index, subnet, bridge, members: 0 };
  }

  async #setSwitchPort(
    host: LabHost | string,
    network: string,
    state: "up" | "down",
  ): Promise<void> {
    this.#open(`set a link ${state}`);
    const name = typeof host === "string" ? host : host.name;
    const h = this.#hosts.get(name);
    if (h === undefined || (typeof host !== "string" && h !== host)) {
      throw new LabError(`Cannot set ${name}'s link ${state}: lab ${this.prefix} has no such host`);
    }
    const net = this.#networks.get(network);
    if (net === undefined || h.addresses[network] === undefined) {
      throw new LabError(
        `Cannot set ${name}'s link on ${network} ${state}: it joined only ${h.networks.join(", ")}`,
      );
    }
    const port = switchLinkName(this.prefix, (await net).index, h.index);
    await ip(["-n", this.#switchNs, "link", "set", port, state], `set ${name}'s link ${state}`);
  }

  async #spawn(
    host: LabHost,
    cmd: string,
    args: readonly string[],
    options: SpawnOptions,
  ): Promise<LabProcess> {
    this.#open(`spawn ${cmd} on ${host.name}`);
    const base = cmd.split("/").pop()!.replace(/[^A-Za-z0-9._-]/g, "_");
    const log = options.log ?? `${this.logDir}/${host.name}-${this.#logCount++}-${base}.log`;
    const p = await LabProcess.start(host.name, host.netns, cmd, args, log, options);
    this.#processes.push(p);
    return p;
  }

  async #run(
    host: LabHost,
    cmd: string,
    args: readonly string[],
    options: RunOptions,
  ): Promise<CommandResult> {
    this.#open(`run ${cmd} on ${host.name}`);
    const run = runBounded("ip", ["netns", "exec", host.netns, cmd, ...args], options);
    this.#runs.add(run);
    try {
      return await run;
    } finally {
      this.#runs.delete(run);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
