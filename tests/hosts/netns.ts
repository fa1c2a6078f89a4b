/**
 * The machine-level side of a lab (tests/hosts/lab.ts): whether network
 * namespaces work here, `ip` with a bound on each call, listing namespaces,
 * links and pids, and sweeping what a crashed run left behind.
 *
 * @module
 */
import { type CommandResult, runBounded } from "./bounded_command.ts";
import {
  bridgeName,
  hostLinkName,
  LAB_NAME_PATTERN,
  labPrefix,
  MAX_SERIAL,
  pidOfLabName,
  switchLinkName,
  switchNamespace,
} from "./lab_names.ts";
import { isAlive } from "../proc_probe.ts";
import { until, WaitTimeoutError } from "../until.ts";
import { errorMessage } from "../../text/error_message.ts";

/** Whether this machine can run a lab. */
export type NetnsAvailability = { ok: true } | { ok: false; reason: string };

/** Thrown when a lab cannot do what it was asked. */
export class LabError extends Error {
  override name = "LabError";
}

/** The most one `ip` call may take. */
export const IP_TIMEOUT_MS = 10_000;

/** How long a SIGTERMed process gets before SIGKILL. */
export const KILL_GRACE_MS = 2000;

let serials = 0;

/**
 * A lab prefix of this process that no other lab uses, claimed by creating
 * its switch namespace (`ip netns add` refuses a name that exists), which is
 * returned with it. Test files running in parallel are workers of one
 * process, each counting serials from 0: the namespace, not the counter,
 * makes a prefix one worker's.
 */
export async function claimPrefix(): Promise<{ prefix: string; switchNs: string }> {
  while (serials <= MAX_SERIAL) {
    const prefix = labPrefix(Deno.pid, serials++);
    const switchNs = switchNamespace(prefix);
    const add = await runBounded("ip", ["netns", "add", switchNs], { timeoutMs: IP_TIMEOUT_MS });
    if (add.success) return { prefix, switchNs };
    if (!add.stderr.includes("File exists")) {
      const why = add.timedOut ? `timed out after ${IP_TIMEOUT_MS} ms` : add.stderr.trim();
      throw new LabError(`Cannot create namespace ${switchNs}: ${why}`);
    }
  }
  throw new LabError(`Cannot name a lab: this process has used all ${MAX_SERIAL + 1} serials`);
}

let availability: Promise<NetnsAvailability> | undefined;

/**
 * Whether this machine can run a lab: Linux, root, `ip` present, and a
 * scratch namespace with a bridge and a veth pair in it can be created and
 * deleted. Probed once per process.
 */
export function netnsAvailable(): Promise<NetnsAvailability> {
  return availability ??= probeNetns();
}

async function probeNetns(): Promise<NetnsAvailability> {
  const no = (reason: string): NetnsAvailability => ({ ok: false, reason });
  try {
    if (Deno.build.os !== "linux") return no(`network namespaces need Linux, not ${Deno.build.os}`);
    const uid = Deno.uid();
    if (uid !== 0) return no(`network namespaces need root; this process runs as uid ${uid}`);
    let version: CommandResult;
    try {
      version = await runBounded("ip", ["-V"], { timeoutMs: IP_TIMEOUT_MS });
    } catch (e) {
      return no(`ip (iproute2) cannot be run: ${String(e)}`);
    }
    if (!version.success) return no(`ip -V failed: ${version.stderr.trim()}`);
    let prefix: string;
    let ns: string;
    try {
      ({ prefix, switchNs: ns } = await claimPrefix());
    } catch (e) {
      return no(`cannot create a network namespace: ${errorMessage(e)}`);
    }
    let reason: string | null = null;
    for (
      const args of [
        ["link", "add", bridgeName(prefix, 0), "type", "bridge"],
        [
          "link",
          "add",
          hostLinkName(prefix, 0),
          "type",
          "veth",
          "peer",
          "name",
          switchLinkName(prefix, 0, 0),
        ],
      ]
    ) {
      const r = await runBounded("ip", ["-n", ns, ...args], { timeoutMs: IP_TIMEOUT_MS });
      if (!r.success) {
        reason = `cannot create a ${args[args.indexOf("type") + 1]} link: ${r.stderr.trim()}`;
        break;
      }
    }
    const del = await runBounded("ip", ["netns", "del", ns], { timeoutMs: IP_TIMEOUT_MS });
    if (!del.success) return no(`cannot delete network namespace ${ns}: ${del.stderr.trim()}`);
    return reason === null ? { ok: true } : no(reason);
  } catch (e) {
    return no(`cannot probe network namespaces: ${String(e)}`);
  }
}

/** Runs `ip args`; throws {@link LabError} saying what it was `for` when it fails. */
/** Used by the lab. */
export async function ip(args: readonly string[], what: string): Promise<string> {
  const r = await runBounded("ip", args, { timeoutMs: IP_TIMEOUT_MS });
  if (!r.success) {
    const why = r.timedOut ? `timed out after ${IP_TIMEOUT_MS} ms` : r.stderr.trim();
    throw new LabError(`Cannot ${what}: ip ${args.join(" ")} failed: ${why}`);
  }
  return r.stdout;
}

function parseJsonList(text: string, what: string): Record<string, unknown>[] {
  const t = text.trim();
  if (t === "") return [];
  const v = JSON.parse(t);
  if (!Array.isArray(v)) throw new LabError(`Cannot read ${what}: ip -j did not print a list`);
  return v;
}

/** Names of this machine's network namespaces (`ip netns list`). */
/** Used by the lab. */
export async function namespaces(): Promise<string[]> {
  const out = await ip(["-j", "netns", "list"], "list network namespaces");
  return parseJsonList(out, "network namespaces").map((n) => String(n.name));
}

/** Names of the links in the root namespace. */
/** Used by the lab. */
export async function rootLinks(): Promise<string[]> {
  const out = await ip(["-j", "link", "show"], "list links");
  return parseJsonList(out, "links").map((l) => String(l.ifname));
}

/** Pids of the processes in namespace `ns` (`ip netns pids`). */
/** Used by the lab. */
export async function pidsIn(ns: string): Promise<number[]> {
  const out = await ip(["netns", "pids", ns], `list the processes in namespace ${ns}`);
  return out.split(/\s+/).filter((p) => /^\d+$/.test(p)).map(Number);
}

/** SIGKILLs every process in `ns` and waits at most `withinMs` for them to go; returns survivors. */
/** Used by the lab. */
export async function emptyNamespace(ns: string, withinMs: number): Promise<number[]> {
  for (const pid of await pidsIn(ns)) killPid(pid, "SIGKILL");
  try {
    await until(`namespace ${ns} to hold no process`, async () => (await pidsIn(ns)).length === 0, {
      timeoutMs: withinMs,
    });
    return [];
  } catch (e) {
    if (!(e instanceof WaitTimeoutError)) throw e;
    return await pidsIn(ns);
  }
}

/** Used by the lab. */
export function killPid(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(pid, signal);
  } catch {
    // Gone already.
  }
}

/**
 * What of lab `prefix` this machine still has: namespaces and root-namespace
 * links whose names start with it, one line each.
 */
export async function labLeftovers(prefix: string): Promise<string[]> {
  const left = (await namespaces()).filter((n) => n.startsWith(prefix)).map((n) =>
    `namespace ${n}`
  );
  for (const l of await rootLinks()) if (l.startsWith(prefix)) left.push(`link ${l}`);
  return left;
}

/** What {@link sweepStaleLabs} did. */
export interface SweepReport {
  /** Namespaces and links removed, e.g. "namespace lg1a2-00-a". */
  removed: string[];
  /** What could not be removed, with why. */
  failed: string[];
}

/**
 * Best effort: removes the namespaces (after SIGKILLing what runs in them)
 * and root-namespace links left by labs whose process is gone, as a crashed
 * test run leaves them. `pattern` must capture the creating pid, base 36, in
 * a group named `pid`; names it does not match, and those of live processes
 * and of this one, are left alone.
 */
export async function sweepStaleLabs(pattern: RegExp = LAB_NAME_PATTERN): Promise<SweepReport> {
  if (!pattern.source.includes("(?<pid>")) {
    throw new LabError(`Cannot sweep stale labs: pattern ${pattern} has no group named "pid"`);
  }
  const stale = (name: string) => {
    const pid = pidOfLabName(name, pattern);
    return pid !== null && pid !== Deno.pid && !isAlive(pid);
  };
  const report: SweepReport = { removed: [], failed: [] };
  for (const ns of (await namespaces()).filter(stale)) {
    try {
      const survivors = await emptyNamespace(ns, KILL_GRACE_MS);
      if (survivors.length > 0) throw new LabError(`pids ${survivors.join(", ")} survived SIGKILL`);
      await ip(["netns", "del", ns], `delete namespace ${ns}`);
      report.removed.push(`namespace ${ns}`);
    } catch (e) {
      report.failed.push(`namespace ${ns}: ${errorMessage(e)}`);
    }
  }
  for (const link of (await rootLinks()).filter(stale)) {
    try {
      await ip(["link", "del", link], `delete link ${link}`);
      report.removed.push(`link ${link}`);
    } catch (e) {
      report.failed.push(`link ${link}: ${errorMessage(e)}`);
    }
  }
  return report;
}
