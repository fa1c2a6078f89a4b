/**
 * A highly available control plane (design §11.1, issue #15): several
 * instances on one PostgreSQL database, one leader at a time.
 *
 * - **Leader.** Holds the lease (control/leader_lease.ts), runs the
 *   {@link ControlPlane} with its reconciler, and answers everything. Every
 *   term opens the books afresh from the store, exactly as a restart does
 *   (no engine restarts: agents keep running what they run), with node
 *   generations floored at the term's epoch.
 * - **Follower.** Forwards every API request to the leader, so any instance
 *   can be given to agents, gateways and the CLI: the live view exists only
 *   on the leader, and no client needs to learn who leads after a failover.
 * - **Read-only.** With no leader known or reachable, reads are answered
 *   from the instance's last known state, marked so, and everything else
 *   with 503 `not_leader` (control/ha_follower.ts).
 *
 * Followers keep that last known state fresh from `NOTIFY` (keys only) and
 * a poll of the change sequence every `pollMs`, reloading it whole at most
 * once per `reloadEveryMs`.
 *
 * @module
 */
import type { Hono } from "hono";
import { type ApiAuth, createControlApi } from "./api.ts";
import { ControlPlane } from "./control_plane.ts";
import { errorMessage } from "./errors.ts";
import { LeaderLease, type LeaseTerm } from "./leader_lease.ts";
import type { PostgresStore } from "./store/postgres_store.ts";
import {
  apiAuthOf,
  type ControlListener,
  type ControlTlsParts,
  controlTlsParts,
  listenControl,
  openOptionsOf,
  type StartControlOptions,
} from "./server.ts";
import type { Leadership } from "../protocol/leadership.ts";
import { Follower } from "./ha_follower.ts";

/** Settings of {@link startHaControl}. */
export interface StartHaControlOptions extends Omit<StartControlOptions, "store"> {
  /** The shared store. */
  store: PostgresStore;
  /**
   * The URL other instances and clients reach this one at. Default: the URL
   * it listens on (right for a specific address, not for 0.0.0.0).
   */
  advertiseUrl?: string;
  /** This instance's id, shown in `GET /v1/leader` and the lease row (default: 8 random hex digits). */
  holder?: string;
  /** How long a term lasts without renewal (ms). Default 10,000. */
  leaseMs?: number;
  /** How often a follower tries to take over, and reads who leads (ms). Default 1,000. */
  retryMs?: number;
  /** How often a follower polls the change sequence (ms). Default 2,000. */
  pollMs?: number;
  /**
   * The least time between two reloads of a follower's last known state
   * (ms). Default 5,000: a reload reads everything (about 1.3 s of CPU at
   * 10,000 nodes, docs/benchmarks.md), and that state answers only while no
   * leader is reachable.
   */
  reloadEveryMs?: number;
  /** Called each time this instance starts leading, with its control plane. */
  onLeading?: (cp: ControlPlane) => Promise<void>;
}

/** A running HA control plane. */
export interface RunningHaControl {
  /** The API's base URL (as listened on). */
  url: string;
  /** This instance's id. */
  holder: string;
  /** Who leads, as this instance sees it. */
  leadership(): Leadership;
  /** The control plane leading here, or null on a follower. */
  leader(): ControlPlane | null;
  /** Stops; a leader hands its lease over at once. */
  close(): Promise<void>;
}

/**
 * Starts an instance: it listens at once, as a follower, and takes the lease
 * when it is free.
 *
 * @throws {BindError} When the API cannot listen; nothing is left running.
 */
export async function startHaControl(o: StartHaControlOptions): Promise<RunningHaControl> {
  const ha = new HaControl(o, await apiAuthOf(o));
  await ha.start();
  return ha;
}

class HaControl implements RunningHaControl {
  readonly holder: string;
  url = "";
  readonly #o: StartHaControlOptions;
  readonly #auth: ApiAuth;
  #lease!: LeaderLease;
  #advertiseUrl = "";
  readonly #leaseMs: number;
  readonly #retryMs: number;
  readonly #pollMs: number;
  readonly #reloadEveryMs: number;
  readonly #log: (line: string) => void;
  #parts: ControlTlsParts | null = null;
  #listener: ControlListener | null = null;
  #forwardClient: Deno.HttpClient | null = null;
  #stopListening: (() => Promise<void>) | null = null;
  #term: LeaseTerm | null = null;
  #nextRenew = 0;
  #leading: { cp: ControlPlane; app: Hono } | null = null;
  #readModel: { cp: ControlPlane; app: Hono } | null = null;
  #leaderUrl: string | null = null;
  /** How requests are answered while another instance leads (or none). */
  #follower: Follower | null = null;
  #leaderSeen = -Infinity;
  #epochSeen = 0;
  #storeOk = true;
  #lastSeq = -1;
  #lastPoll = -Infinity;
  #reloadWanted = false;
  #reloading: Promise<void> | null = null;
  #lastReload = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ticking: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(o: StartHaControlOptions, auth: ApiAuth) {
    this.#o = o;
    this.#auth = auth;
    this.#leaseMs = o.leaseMs ?? 10_000;
    this.#retryMs = o.retryMs ?? 1_000;
    this.#pollMs = o.pollMs ?? 2_000;
    this.#reloadEveryMs = o.reloadEveryMs ?? 5_000;
    this.#log = o.log ?? (() => {});
    this.holder = o.holder ?? crypto.randomUUID().slice(0, 8);
  }

  async start(): Promise<void> {
    this.#parts = await controlTlsParts(this.#o.tls);
    if (this.#o.tls !== undefined) {
      this.#forwardClient = Deno.createHttpClient({ caCerts: [this.#o.tls.ca.certPem] });
    }
    this.#follower = new Follower(this.holder, this.#forwardClient, this.#log);
    try {
      this.#listener = await listenControl(this.#o, this.#parts, (req) => this.#handle(req));
    } catch (e) {
      this.#forwardClient?.close();
      await this.#o.store.close();
      throw e;
    }
    this.url = this.#listener.url;
    this.#advertiseUrl = this.#o.advertiseUrl ?? this.url;
    this.#lease = new LeaderLease({
      store: this.#o.store,
      holder: this.holder,
      address: this.#advertiseUrl,
      leaseMs: this.#leaseMs,
    });
    this.#stopListening = this.#o.store.listen(() => this.#wantReload());
    // The first look: take the lease if it is free, else load the last known state.
    this.#ticking = this.#tick();
    await this.#ticking;
    this.#schedule();
  }

  leadership(): Leadership {
    const role = this.#leading !== null
      ? "leader"
      : this.#leaderUrlNow() !== null
      ? "follower"
      : "read_only";
    return {
      mode: "shared",
      role,
      holder: this.holder,
      epoch: this.#term?.epoch ?? this.#epochSeen,
      leader: this.#leading !== null ? this.#advertiseUrl : this.#leaderUrlNow(),
      reason: role !== "read_only"
        ? null
        : this.#storeOk
        ? "no leader is known yet (a failover may be under way)"
        : `the store ${this.#o.store.name} is unreachable`,
    };
  }

  leader(): ControlPlane | null {
    return this.#leading?.cp ?? null;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#ticking;
    await this.#reloading;
    const term = this.#term;
    await this.#stepDown("shutting down");
    if (term !== null) await this.#lease.release(term).catch(() => {});
    await this.#readModel?.cp.stop();
    this.#readModel = null;
    await this.#stopListening?.();
    await this.#listener?.close();
    this.#forwardClient?.close();
    await this.#o.store.close();
  }

  /** The leader's URL while its lease was seen running within the last lease length. */
  #leaderUrlNow(): string | null {
    return performance.now() - this.#leaderSeen < this.#leaseMs ? this.#leaderUrl : null;
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#ticking = this.#tick().finally(() => this.#schedule());
    }, this.#retryMs);
  }

  async #tick(): Promise<void> {
    if (this.#closed) return;
    try {
      if (this.#term !== null) await this.#tickLeader(this.#term);
      else await this.#tickFollower();
    } catch (e) {
      this.#log(`leadership: ${errorMessage(e)}`);
    }
  }

  async #tickLeader(term: LeaseTerm): Promise<void> {
    if (performance.now() >= this.#nextRenew) {
      try {
        const renewed = await this.#lease.renew(term);
        this.#storeOk = true;
        if (renewed === null) return await this.#stepDown("another control plane took over");
        this.#term = renewed;
        this.#nextRenew = performance.now() + this.#leaseMs / 3;
      } catch (e) {
        this.#storeOk = false;
        this.#log(`leadership: cannot renew the lease: ${errorMessage(e)}`);
      }
    }
    if (!this.#lease.holds(this.#term)) {
      await this.#stepDown(`the lease lapsed (the store ${this.#o.store.name} did not answer)`);
    }
  }

  async #tickFollower(): Promise<void> {
    let term: LeaseTerm | null;
    try {
      term = await this.#lease.tryAcquire();
      if (term === null) {
        const row = await this.#lease.read();
        this.#epochSeen = row.epoch;
        const url = row.expiresInMs > 0 && row.holder !== this.holder ? row.address : null;
        if (url !== this.#leaderUrl) this.#follower?.abort();
        this.#leaderUrl = url;
        if (url !== null) this.#leaderSeen = performance.now();
      }
      if (!this.#storeOk) this.#log("leadership: the store answers again");
      this.#storeOk = true;
    } catch (e) {
      if (this.#storeOk) this.#log(`leadership: the store is unreachable: ${errorMessage(e)}`);
      this.#storeOk = false;
      return;
    }
    if (term !== null) return await this.#lead(term);
    await this.#pollChanges();
  }

  /** Opens the books for a new term and starts acting. */
  async #lead(term: LeaseTerm): Promise<void> {
    this.#follower?.abort();
    this.#term = term;
    this.#nextRenew = performance.now() + this.#leaseMs / 3;
    this.#o.store.setEpoch(term.epoch, this.holder);
    this.#epochSeen = term.epoch;
    let cp: ControlPlane;
    try {
      cp = await this.#open(term.epoch, false);
    } catch (e) {
      this.#log(`leadership: cannot open the books for epoch ${term.epoch}: ${errorMessage(e)}`);
      this.#term = null;
      this.#o.store.setEpoch(null);
      await this.#lease.release(term).catch(() => {});
      return;
    }
    if (this.#term !== term || !this.#lease.holds(term) || this.#closed) {
      await cp.stop();
      if (this.#term === term) await this.#stepDown("the lease lapsed while opening");
      return;
    }
    this.#leading = { cp, app: this.#app(cp) };
    cp.start();
    this.#log(`leading: epoch ${term.epoch} (${this.#advertiseUrl})`);
    const previous = this.#readModel;
    this.#readModel = null;
    await previous?.cp.stop();
    await this.#o.onLeading?.(cp).catch((e) =>
      this.#log(`leadership: after taking over: ${errorMessage(e)}`)
    );
  }

  /** Stops acting; the leader's books become the last known state. */
  async #stepDown(reason: string): Promise<void> {
    const leading = this.#leading;
    const term = this.#term;
    this.#term = null;
    this.#leading = null;
    if (term === null) return this.#o.store.setEpoch(null);
    this.#log(`stepped down from epoch ${term.epoch}: ${reason}`);
    // A pass already running finishes under the old term (the database refuses its writes
    // if the term has ended); none starts, since leading() is false from here.
    await leading?.cp.stop();
    this.#o.store.setEpoch(null);
    if (leading === null) return;
    const previous = this.#readModel;
    this.#readModel = leading;
    await previous?.cp.stop();
    this.#wantReload();
  }

  /** Reloads the last known state when the change sequence moved (the poll behind NOTIFY). */
  async #pollChanges(): Promise<void> {
    if (performance.now() - this.#lastPoll < this.#pollMs && this.#readModel !== null) {
      if (this.#reloadWanted) this.#reload();
      return;
    }
    this.#lastPoll = performance.now();
    const seq = await this.#o.store.changeSeq().catch(() => null);
    if (seq === null) return;
    if (seq !== this.#lastSeq || this.#readModel === null) this.#reloadWanted = true;
    if (this.#reloadWanted) {
      this.#lastSeq = seq;
      this.#reload();
    }
  }

  #wantReload(): void {
    if (this.#leading !== null || this.#closed) return;
    this.#reloadWanted = true;
    this.#reload();
  }

  /** One reload at a time, at most one per `reloadEveryMs`. */
  #reload(): void {
    if (this.#reloading !== null || this.#leading !== null || this.#closed) return;
    const wait = this.#lastReload + this.#reloadEveryMs - performance.now();
    if (wait > 0) return; // the next tick tries again
    this.#reloadWanted = false;
    this.#lastReload = performance.now();
    this.#reloading = (async () => {
      try {
        const cp = await this.#open(0, true);
        if (this.#leading !== null || this.#closed) return void await cp.stop();
        const previous = this.#readModel;
        this.#readModel = { cp, app: this.#app(cp) };
        await previous?.cp.stop();
      } catch (e) {
        this.#reloadWanted = true;
        this.#log(`follower: cannot load the state: ${errorMessage(e)}`);
      } finally {
        this.#reloading = null;
      }
    })();
  }

  #open(epoch: number, readOnly: boolean): Promise<ControlPlane> {
    return ControlPlane.open({
      ...openOptionsOf(this.#o, this.#parts),
      store: this.#o.store,
      epoch: readOnly ? undefined : epoch,
      readOnly,
      leading: readOnly ? () => false : () =>
        this.#term?.epoch === epoch &&
        this.#lease.holds(this.#term),
      leadership: () => this.leadership(),
    });
  }

  #app(cp: ControlPlane): Hono {
    return createControlApi(cp, this.#auth, this.#o.pages);
  }

  #handle(req: Request): Promise<Response> | Response {
    const leading = this.#leading;
    if (leading !== null) return leading.app.fetch(req);
    return this.#follower!.answer(req, {
      local: this.#readModel?.app ?? null,
      leaderUrl: () => this.#leaderUrlNow(),
      leadership: () => this.leadership(),
    });
  }
}
