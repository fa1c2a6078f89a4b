/**
 * Discovery in the agent (design §5.1): the hardware once at start, then
 * the GPUs again every `rediscoverMs` for their health. What it finds goes
 * out with the next heartbeat; a registration carries it too.
 *
 * A failed GPU listing keeps the last good GPUs, each marked with why
 * (agent/reports.ts); the engines' own GPU memory is known to be theirs.
 *
 * @module
 */
import { discoverInventory } from "../discovery/discover.ts";
import type { FabricAttachment, Gpu } from "../discovery/types.ts";
import { groupMembers } from "../supervisor/proc.ts";
import type { ShardReport } from "../supervisor/types.ts";
import type { AgentOptions } from "./agent_options.ts";
import { errorMessage } from "../text/error_message.ts";
import type { Logger } from "../log/log.ts";
import type { DiscoverySource } from "./metrics.ts";
import { gpusAfterRediscovery } from "./reports.ts";
import { sleep } from "./retry.ts";

/** What a {@link DiscoveryLoop} needs. */
export interface DiscoveryLoopOptions {
  /** Discovery's seams and the operator's fabrics. */
  settings: AgentOptions["discovery"];
  /** How often the GPUs are rediscovered. Default 60,000. */
  rediscoverMs?: number;
  /** The supervisor's shards: their processes' GPU memory is ours. */
  shards: () => ShardReport[];
  /** Where findings and problems go. */
  log: Logger;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
}

/** The agent's view of its hardware, and the loop that keeps it fresh. */
export class DiscoveryLoop {
  readonly #opts: DiscoveryLoopOptions;
  #gpus: Gpu[] = [];
  #lastGoodGpus: Gpu[] = [];
  #fabrics: FabricAttachment[] = [];
  #pendingGpus: Gpu[] | null = null;
  readonly #errors: Record<DiscoverySource, number> = { nvidia_smi: 0, sysfs: 0 };

  /** Creates the loop; {@link discover} runs discovery, {@link run} repeats it. */
  constructor(options: DiscoveryLoopOptions) {
    this.#opts = options;
  }

  /** The GPUs as last discovered, health included. */
  get gpus(): Gpu[] {
    return this.#gpus;
  }

  /** The fabric attachments found at start. */
  get fabrics(): FabricAttachment[] {
    return this.#fabrics;
  }

  /** Failed discovery runs by source, for the agent's metrics. */
  get errors(): Record<DiscoverySource, number> {
    return this.#errors;
  }

  /** GPUs the control plane has not been sent yet; null when it has them. */
  get pendingGpus(): Gpu[] | null {
    return this.#pendingGpus;
  }

  /** A heartbeat carried `gpus`: unless newer ones arrived meanwhile, none are pending. */
  delivered(gpus: Gpu[] | null): void {
    if (this.#pendingGpus === gpus) this.#pendingGpus = null;
  }

  /** A registration carried the GPUs: none are pending. */
  registered(): void {
    this.#pendingGpus = null;
  }

  /**
   * Discovers the hardware; GPU health goes out with the next heartbeat
   * (design §5.1). `first` also takes the fabrics and logs what was found.
   * Never throws: a failure is logged.
   */
  async discover(first: boolean): Promise<void> {
    const d = this.#opts.settings ?? {};
    const log = this.#opts.log;
    try {
      const inv = await discoverInventory({
        nvidiaSmi: d.nvidiaSmi,
        sysfsRoot: d.sysfsRoot,
        fabrics: d.fabrics,
        timeoutMs: d.timeoutMs,
        ownPids: this.#ownPids(),
      });
      // Counted per run: the GPU list unreadable, or an adapter's attributes.
      if (inv.source === "nvidia-smi-failed") this.#errors.nvidia_smi++;
      if (inv.hcas.some((h) => h.problems.length > 0)) this.#errors.sysfs++;
      const gpus = gpusAfterRediscovery(this.#lastGoodGpus, inv);
      if (inv.source === "nvidia-smi") this.#lastGoodGpus = inv.gpus;
      const before = new Map(this.#gpus.map((g) => [g.index, g.health.problems.join("; ")]));
      for (const g of gpus) {
        const now = g.health.problems.join("; ");
        if (now !== "" && before.get(g.index) !== now) {
          log.warn("GPU unhealthy", { gpu: g.index, problems: g.health.problems });
        }
      }
      this.#gpus = gpus;
      // The next heartbeat carries them; a registration carries them too and clears this.
      this.#pendingGpus = gpus;
      if (first) {
        this.#fabrics = inv.fabrics;
        log.info("discovered", {
          source: inv.source,
          gpus: inv.gpus.map((g) => g.class),
          fabrics: inv.fabrics.map((f) => f.fabric),
        });
        if (inv.problems.length > 0 || inv.warnings.length > 0) {
          log.warn("discovery problems", {
            problems: inv.problems.slice(0, 20),
            warnings: inv.warnings.slice(0, 20),
          });
        }
      }
    } catch (e) {
      log.error("discovery failed", { error: errorMessage(e) });
    }
  }

  /** Rediscovers every `rediscoverMs` until the agent stops. */
  async run(): Promise<void> {
    const every = this.#opts.rediscoverMs ?? 60_000;
    const signal = this.#opts.signal;
    while (!signal.aborted) {
      await sleep(every, signal);
      if (signal.aborted) return;
      await this.discover(false);
    }
  }

  /** Pids of our engines and their workers: their GPU memory is ours (design §5.1). */
  #ownPids(): Set<number> {
    const pids = new Set<number>();
    for (const s of this.#opts.shards()) {
      if (s.pid === null) continue;
      pids.add(s.pid);
      try {
        for (const p of groupMembers(s.pid)) pids.add(p);
      } catch {
        // /proc unreadable: the leader alone.
      }
    }
    return pids;
  }
}
