/**
 * Change notifications between control planes on one PostgreSQL database
 * (issue #15): every write sends `NOTIFY llmgw_changes` with its table and
 * key, never the record (PostgreSQL refuses payloads of 8,000 bytes or
 * more), and followers LISTEN on a connection of their own, made again with
 * backoff when lost.
 *
 * @module
 */
import pg from "pg";
import { describeStoreError as describe } from "./store_errors.ts";
import { type TableName, TABLES } from "./tables.ts";

/** The channel change notifications go out on. */
export const CHANGE_CHANNEL = "llmgw_changes";

/** PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more; past this, keys are left out. */
const MAX_PAYLOAD_BYTES = 7_000;

/** The tables whose changes followers follow: every record table. */
export type ChangeTable = TableName;

/** A change notification: a table and the keys written, or null for "reload the table". */
export interface StoreChange {
  /** The table, or "*" after a lost connection (anything may have changed). */
  table: ChangeTable | "*";
  /** The keys written or deleted; null: unknown. */
  keys: string[] | null;
}

/** A change notification's payload: the table and the key, never a record. */
export function payload(table: ChangeTable, key: string): string {
  const text = JSON.stringify({ t: table, k: [key] });
  return new TextEncoder().encode(text).length <= MAX_PAYLOAD_BYTES
    ? text
    : JSON.stringify({ t: table, k: null });
}

/** Parses a notification's payload; anything unexpected means "reload everything". */
export function parseChange(text: string | undefined): StoreChange {
  try {
    const v = JSON.parse(text ?? "");
    if (typeof v?.t === "string" && TABLES.some((table) => table.name === v.t)) {
      const keys = Array.isArray(v.k) && v.k.every((k: unknown) => typeof k === "string")
        ? v.k as string[]
        : null;
      return { table: v.t as ChangeTable, keys };
    }
  } catch {
    // fall through
  }
  return { table: "*", keys: null };
}

/** LISTEN on a connection of its own, made again with backoff when lost. */
export class ChangeListener {
  readonly #url: string;
  readonly #name: string;
  readonly #fn: (change: StoreChange) => void;
  readonly #log: (line: string) => void;
  #client: pg.Client | null = null;
  #stopped = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #delay = 250;
  /** A connection or an attempt failed since the last LISTEN: notifications may be gone. */
  #missed = false;

  constructor(url: string, name: string, fn: (c: StoreChange) => void, log: (l: string) => void) {
    this.#url = url;
    this.#name = name;
    this.#fn = fn;
    this.#log = log;
  }

  start(): void {
    void this.#connect();
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({
      connectionString: this.#url,
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
      application_name: "llmgw-control-listen",
    });
    this.#client = client;
    let lost = false;
    const onLost = (why: string) => {
      if (lost || this.#stopped) return;
      lost = true;
      this.#missed = true;
      this.#client = null;
      client.end().catch(() => {});
      this.#log(`store ${this.#name}: change notifications lost (${why}); reconnecting`);
      this.#schedule();
    };
    client.on("error", (e) => onLost(describe(e)));
    client.on("end", () => onLost("connection ended"));
    client.on("notification", (msg) => {
      if (msg.channel === CHANGE_CHANNEL) this.#fn(parseChange(msg.payload));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
      if (this.#stopped) {
        await client.end().catch(() => {});
        return;
      }
      this.#delay = 250;
      // Whatever was sent while no connection listened is gone: reload all. That
      // includes a first attempt that failed: the caller read its state before
      // listening, and writes since then went unheard.
      if (this.#missed) this.#fn({ table: "*", keys: null });
      this.#missed = false;
    } catch (e) {
      onLost(describe(e));
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    const delay = this.#delay;
    this.#delay = Math.min(this.#delay * 2, 5_000);
    this.#timer = setTimeout(() => void this.#connect(), delay);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }
}
