/**
 * The multi-host rehearsal's hosts (issue #14): lab hosts (lab.ts) that act
 * as machines of their own, and the runner that follows docs/deploy.md on
 * them step by step (runbook.ts).
 *
 * A {@link RehearsalHost} has a root directory standing in for its `/` (the
 * doc's `ROOT`), a working directory for the operator's files, and a host
 * name of its own: each command runs as `ip netns exec NS env -i VARS
 * unshare --uts sh -c 'hostname NAME && exec "$@"' …`, every step an exec,
 * so the pid the lab tracks is the command's own and nothing of this
 * process's environment leaks in. Units are started as systemd would run
 * them, from the installed unit file (systemd_unit.ts).
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CommandResult, runBounded } from "./bounded_command.ts";
import type { LabHost, LabProcess } from "./lab.ts";
import { parseRunbook, preludeFor, type Role, type Runbook, type RunbookStep } from "./runbook.ts";
import { serviceEnvironment, serviceSpec } from "./systemd_unit.ts";
import { readPidFile } from "../../supervisor/pid_file.ts";

/** The checkout this file is in. */
export const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** A role a host plays (a runbook role other than `all`). */
export type HostRole = Exclude<Role, "all">;

/** Thrown when a step of the rehearsal fails; the message carries what the step printed. */
export class RehearsalError extends Error {
  override name = "RehearsalError";
}

/** How long one doc step may run on one host (each CLI call starts a Deno). */
const STEP_TIMEOUT_MS = 120_000;

/** A lab host acting as a machine: its root, working directory and host name. */
export class RehearsalHost {
  /** Services started on it, by unit name. */
  readonly services = new Map<string, LabProcess>();

  constructor(
    /** Its lab host. */
    readonly lab: LabHost,
    /** The role it plays in docs/deploy.md. */
    readonly role: HostRole,
    /** Its `/`: the doc's ROOT. */
    readonly root: string,
    /** Where the operator's commands run and copied files land (also HOME). */
    readonly work: string,
    /** Variables of its own for the doc's steps (NVIDIA_SMI, FABRICS, …). */
    readonly vars: Readonly<Record<string, string>>,
    /** Directories put first on the PATH of its shell and its services. */
    readonly pathFirst: readonly string[] = [],
  ) {}

  /** Its name in the lab, which is also its host name. */
  get name(): string {
    return this.lab.name;
  }

  /** Its address on the management network. */
  get address(): string {
    return this.lab.address();
  }

  /** The PATH its shell and services get: what it was given first, then systemd's. */
  path(base: string): string {
    return [...this.pathFirst, base].join(":");
  }

  /** `cmd args` in this host as an `exec` chain with exactly `env`, as this host's name. */
  command(env: Record<string, string>, cmd: readonly string[]): string[] {
    return [
      "-i",
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      "unshare",
      "--uts",
      "sh",
      "-c",
      'hostname "$0" && exec "$@"',
      this.name,
      ...cmd,
    ];
  }

  /** Runs `script` with `sh -eu` in its working directory, with `env`, bounded in time. */
  async sh(script: string, env: Record<string, string>): Promise<CommandResult> {
    return await this.lab.run("env", this.command(env, ["sh", "-eu", "-c", script]), {
      cwd: this.work,
      timeoutMs: STEP_TIMEOUT_MS,
    });
  }

  /**
   * Starts installed unit `unit` as systemd would: `ExecStart` from
   * ROOT/etc/systemd/system/UNIT with the root's paths, its environment
   * files, its state and cache directories created, in its working
   * directory. `standIns` are added last: what the rehearsal puts in place
   * of what a real host has installed (the fake engine for vLLM).
   */
  async startUnit(unit: string, standIns: Record<string, string> = {}): Promise<LabProcess> {
    if (this.services.has(unit)) throw new RehearsalError(`${unit} already runs on ${this.name}`);
    const unitPath = join(this.root, "etc/systemd/system", unit);
    const spec = serviceSpec(await Deno.readTextFile(unitPath), unitPath, this.root);
    for (const dir of spec.stateDirectories) {
      await Deno.mkdir(dir, { recursive: true });
      await Deno.chmod(dir, spec.stateDirectoryMode);
    }
    for (const dir of spec.cacheDirectories) await Deno.mkdir(dir, { recursive: true });
    const files = new Map<string, string>();
    for (const f of spec.environmentFiles) {
      try {
        files.set(f.path, await Deno.readTextFile(f.path));
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      }
    }
    const env = serviceEnvironment(spec, files);
    env.PATH = this.path(env.PATH);
    const p = await this.lab.spawn("env", this.command({ ...env, ...standIns }, spec.argv), {
      cwd: spec.workingDirectory,
      log: join(this.work, "..", `${unit}.log`),
    });
    this.services.set(unit, p);
    return p;
  }

  /** The service `unit`, started before. */
  service(unit: string): LabProcess {
    const p = this.services.get(unit);
    if (p === undefined) throw new RehearsalError(`${unit} was not started on ${this.name}`);
    return p;
  }
}

/** A shard's engine as its agent's pid file records it. */
export interface EngineProcess {
  /** The shard. */
  shard: string;
  /** The engine's pid (its process group's leader). */
  pid: number;
}

/** The engines an agent's state directory records, by shard. */
export function enginesIn(stateDir: string): EngineProcess[] {
  const out: EngineProcess[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(join(stateDir, "shards"))];
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return out;
    throw e;
  }
  for (const entry of entries) {
    const read = readPidFile(join(stateDir, "shards", entry.name, "pid.json"));
    if ("record" in read) out.push({ shard: read.record.shard_id, pid: read.record.pid });
  }
  return out.sort((a, b) => a.shard.localeCompare(b.shard));
}

/** A process's environment from /proc/PID/environ (root reads any). */
export function environOf(pid: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of Deno.readTextFileSync(`/proc/${pid}/environ`).split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/**
 * Builds what `deno task bundle` makes into `dist`, from this checkout: the
 * three role bundles, and the admin CLI `llmgw.js` (main.ts) that
 * install.sh puts beside the control plane.
 */
export async function bundleRoles(dist: string): Promise<void> {
  await Deno.mkdir(dist, { recursive: true });
  const entries = [
    ...["agent", "control", "gateway"].map((r) => [`llmgw-${r}.js`, `roles/${r}.ts`]),
    ["llmgw.js", "main.ts"],
  ];
  for (const [out, entry] of entries) {
    const r = await runBounded(
      Deno.execPath(),
      ["bundle", "--quiet", "--platform", "deno", "-o", join(dist, out), entry],
      { cwd: REPO, timeoutMs: 120_000 },
    );
    if (!r.success) throw new RehearsalError(`Cannot bundle ${entry}: ${r.stderr}${r.stdout}`);
  }
}

/** What one step printed on one host. */
export interface StepOutput {
  /** The host. */
  host: string;
  /** Its standard output. */
  stdout: string;
  /** Its standard error. */
  stderr: string;
}

/**
 * Follows docs/deploy.md on the hosts: {@link Rehearsal.step} runs the next
 * step, which must be the one named, so the test walks the whole page in its
 * order and {@link Rehearsal.finish} proves no step was left out.
 */
export class Rehearsal {
  readonly book: Runbook;
  #next = 0;
  #hosts: RehearsalHost[];
  #shared: Record<string, string>;

  constructor(
    markdown: string,
    where: string,
    hosts: readonly RehearsalHost[],
    /** Variables every host's shell gets (CONTROL_HOST, LLMGW_SRC, …). */
    shared: Record<string, string>,
  ) {
    this.book = parseRunbook(markdown, where);
    this.#hosts = [...hosts];
    this.#shared = shared;
  }

  /** The hosts playing `role`, in the order given. */
  hostsOf(role: HostRole): RehearsalHost[] {
    return this.#hosts.filter((h) => h.role === role);
  }

  /** The one host playing `role`. */
  only(role: HostRole): RehearsalHost {
    const hosts = this.hostsOf(role);
    if (hosts.length !== 1) {
      throw new RehearsalError(`expected one ${role} host, have ${hosts.length}`);
    }
    return hosts[0];
  }

  /** The environment of an operator's shell on `host`. */
  shellEnv(host: RehearsalHost): Record<string, string> {
    return {
      PATH: host.path(
        `${
          join(Deno.execPath(), "..")
        }:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
      ),
      HOME: host.work,
      LANG: "C.UTF-8",
      DENO_NO_UPDATE_CHECK: "1",
      ...this.#shared,
      ROOT: host.root,
      ...host.vars,
    };
  }

  /**
   * Runs step `name`, the next one in the document, on every host of its
   * role (one after the other): a script with the role's variables first, a
   * unit start (with `standIns`, see {@link RehearsalHost.startUnit}), or a
   * copy between working directories. `skip` passes over it, saying why.
   *
   * @throws {RehearsalError} When the next step is another, or it fails on a host.
   */
  async step(
    name: string,
    options: { standIns?: Record<string, string>; skip?: string } = {},
  ): Promise<StepOutput[]> {
    const step = this.book.steps[this.#next];
    if (step?.step !== name) {
      throw new RehearsalError(
        `the rehearsal expected step "${name}" next, docs/deploy.md has ${
          step === undefined ? "no more steps" : `"${step.step}" (line ${step.line})`
        }`,
      );
    }
    this.#next++;
    if (options.skip !== undefined) {
      console.warn(`rehearsal: skipping step ${name} of docs/deploy.md: ${options.skip}`);
      return [];
    }
    return await this.#run(step, options.standIns ?? {});
  }

  async #run(step: RunbookStep, standIns: Record<string, string>): Promise<StepOutput[]> {
    if (step.kind === "copy") {
      const [from] = step.from === "all" ? [] : this.hostsOf(step.from);
      if (from === undefined) throw new RehearsalError(`step ${step.step}: no ${step.from} host`);
      const to = step.to.flatMap((r) => r === "all" ? this.#hosts : this.hostsOf(r));
      for (const file of step.files) {
        const src = join(from.work, file);
        const mode = (await Deno.stat(src)).mode! & 0o777;
        for (const h of to) {
          await Deno.copyFile(src, join(h.work, file));
          await Deno.chmod(join(h.work, file), mode);
        }
      }
      return [];
    }
    const hosts = step.role === "all" ? this.#hosts : this.hostsOf(step.role);
    if (hosts.length === 0) throw new RehearsalError(`step ${step.step}: no ${step.role} host`);
    const outputs: StepOutput[] = [];
    for (const h of hosts) {
      if (step.kind === "start") {
        await h.startUnit(step.unit, standIns);
        continue;
      }
      const r = await h.sh(preludeFor(this.book, h.role) + step.script, this.shellEnv(h));
      if (!r.success) {
        throw new RehearsalError(
          `docs/deploy.md step ${step.step} (line ${step.line}) failed on ${h.name} ` +
            `(exit ${r.code}${r.timedOut ? ", timed out" : ""}):\n${r.stdout}\n${r.stderr}`,
        );
      }
      outputs.push({ host: h.name, stdout: r.stdout, stderr: r.stderr });
    }
    return outputs;
  }

  /** @throws {RehearsalError} When a step of the document was not run. */
  finish(): void {
    const left = this.book.steps.slice(this.#next).map((s) => s.step);
    if (left.length > 0) {
      throw new RehearsalError(`docs/deploy.md steps not rehearsed: ${left.join(", ")}`);
    }
  }
}

/** Makes a host's root and working directory under `dir`. */
export async function hostDirs(dir: string, name: string): Promise<{ root: string; work: string }> {
  const root = join(dir, name, "root");
  const work = join(dir, name, "work");
  await Deno.mkdir(root, { recursive: true });
  await Deno.mkdir(work, { recursive: true, mode: 0o700 });
  return { root, work };
}

/** Adds a default route through `host`'s management interface, as a real host has one. */
export async function addDefaultRoute(host: LabHost): Promise<void> {
  const r = await host.run("ip", ["route", "add", "default", "dev", host.ifname.mgmt]);
  if (!r.success) {
    throw new RehearsalError(`Cannot add a default route on ${host.name}: ${r.stderr}`);
  }
}
