/**
 * Leadership among control planes on one PostgreSQL database (design §11.1,
 * issue #15): one lease row whose expiry is computed by the database's
 * clock, and an epoch that every takeover increments.
 *
 * Why a row and not `pg_advisory_lock`: a session lock is held by a session,
 * and behind a connection pooler (or when a session dies but its backend
 * lingers) two instances can each believe they hold it. A row with an
 * expiry has one holder at a time by construction, and the epoch it carries
 * fences writes (control/store/postgres_store.ts): a deposed leader's writes name
 * an epoch the row no longer holds and change nothing.
 *
 * Local validity is measured on the monotonic clock from the moment the
 * acquiring or renewing statement was sent: the database computed the
 * expiry later than that, so `sent + lease` never outlasts the row. A
 * process frozen past its lease (SIGSTOP) finds its term over at once when
 * it thaws, before any timer of its own runs a pass.
 *
 * @module
 */
import type { PostgresStore } from "./store/postgres_store.ts";

/** A term of leadership this instance holds. */
export interface LeaseTerm {
  /** The term's epoch (1, 2, …). */
  epoch: number;
  /** Until when, on the monotonic clock (ms, `performance.now()`), it is certainly held. */
  validUntil: number;
}

/** Who leads, as the lease row says. */
export interface LeaderRecord {
  /** The holder's id; "" before anyone led. */
  holder: string;
  /** The URL the leader is reached at. */
  address: string;
  /** Its epoch. */
  epoch: number;
  /** Milliseconds until the lease expires by the database's clock (≤ 0: expired). */
  expiresInMs: number;
}

/** Settings of a {@link LeaderLease}. */
export interface LeaderLeaseOptions {
  /** The store whose database holds the lease row. */
  store: PostgresStore;
  /** This instance's id, unique among instances. */
  holder: string;
  /** The URL other instances and clients reach this one at. */
  address: string;
  /** How long a term lasts without renewal (ms). */
  leaseMs: number;
  /** The monotonic clock (ms). Default `performance.now`. */
  monotonic?: () => number;
}

/** The lease's statements. */
export class LeaderLease {
  readonly #o: LeaderLeaseOptions;
  readonly #now: () => number;

  /** Creates the lease over `options.store`. */
  constructor(options: LeaderLeaseOptions) {
    this.#o = options;
    this.#now = options.monotonic ?? (() => performance.now());
  }

  /** This instance's id. */
  get holder(): string {
    return this.#o.holder;
  }

  /** The lease length (ms). */
  get leaseMs(): number {
    return this.#o.leaseMs;
  }

  /**
   * Takes the lease when it has expired (by the database's clock), with the
   * next epoch; null when another holder's lease is still running.
   */
  async tryAcquire(): Promise<LeaseTerm | null> {
    const sent = this.#now();
    const rows = await this.#o.store.query(
      "acquire the leader lease",
      `UPDATE llmgw_leader SET holder = $1, address = $2, epoch = epoch + 1,
         expires_at = now() + $3 * interval '1 millisecond', acquired_at = now()
       WHERE id = 1 AND expires_at <= now() RETURNING epoch`,
      [this.#o.holder, this.#o.address, this.#o.leaseMs],
    );
    if (rows.length === 0) return null;
    return { epoch: Number(rows[0].epoch), validUntil: sent + this.#o.leaseMs };
  }

  /**
   * Extends a running term; null when it has ended (expired, or taken over):
   * a lapsed term is never revived, since another instance may have acted
   * on its expiry. Throws a StoreError when the database cannot be reached.
   */
  async renew(term: LeaseTerm): Promise<LeaseTerm | null> {
    const sent = this.#now();
    const rows = await this.#o.store.query(
      "renew the leader lease",
      `UPDATE llmgw_leader SET expires_at = now() + $3 * interval '1 millisecond', address = $4
       WHERE id = 1 AND epoch = $1 AND holder = $2 AND expires_at > now() RETURNING epoch`,
      [term.epoch, this.#o.holder, this.#o.leaseMs, this.#o.address],
    );
    if (rows.length === 0) return null;
    return { epoch: term.epoch, validUntil: sent + this.#o.leaseMs };
  }

  /** Ends a term now, so another instance takes over at once (a clean shutdown). */
  async release(term: LeaseTerm): Promise<void> {
    await this.#o.store.query(
      "release the leader lease",
      `UPDATE llmgw_leader SET expires_at = now() WHERE id = 1 AND epoch = $1 AND holder = $2`,
      [term.epoch, this.#o.holder],
    );
  }

  /** The lease row as it stands. */
  async read(): Promise<LeaderRecord> {
    const [row] = await this.#o.store.query(
      "read the leader lease",
      `SELECT holder, address, epoch,
         CASE WHEN isfinite(expires_at)
           THEN EXTRACT(EPOCH FROM (expires_at - now())) * 1000 ELSE -1e12 END::float8
           AS expires_in_ms
       FROM llmgw_leader WHERE id = 1`,
    );
    return {
      holder: row.holder as string,
      address: row.address as string,
      epoch: Number(row.epoch),
      expiresInMs: Number(row.expires_in_ms),
    };
  }

  /** Whether `term` is certainly still held now, by the local monotonic clock. */
  holds(term: LeaseTerm | null): boolean {
    return term !== null && this.#now() < term.validUntil;
  }
}
