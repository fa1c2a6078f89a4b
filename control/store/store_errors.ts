/**
 * A store's failures in words (design §11), one rule for both SQL drivers:
 * every message names the store (a file, or a URL without its password) and
 * what failed, and never carries the connection URL, which may hold a
 * password (issue #15).
 *
 * @module
 */
import { StoreError } from "./store.ts";
import { errorMessage } from "../../text/error_message.ts";

/** SQLite's primary result codes that mean the file itself is bad. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/**
 * A driver's error in words: SQLite's (a numeric `errcode`) and PostgreSQL's
 * or a socket's (a string `code`) that say something an operator can act on,
 * otherwise the error's own message.
 */
export function describeStoreError(e: unknown): string {
  const err = e as { code?: unknown; errcode?: unknown } | null;
  const message = errorMessage(e);
  if (typeof err?.errcode === "number") {
    switch (err.errcode & 0xff) {
      case SQLITE_NOTADB:
        return "file is not a database (damaged?)";
      case SQLITE_CORRUPT:
        return `the database is damaged (${message})`;
      default:
        return message;
    }
  }
  switch (err?.code) {
    case "ECONNREFUSED":
      return `connection refused (is PostgreSQL running and listening there?)`;
    case "28P01":
    case "28000":
      return `authentication failed (${message})`;
    case "3D000":
      return `the database does not exist (${message})`;
    default:
      return message;
  }
}

/** Any failure of an operation, as a {@link StoreError} naming the store and the operation. */
export function storeFailure(store: string, what: string, e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = new StoreError(`Store ${store}: ${what} failed: ${describeStoreError(e)}`);
  err.cause = e;
  return err;
}

/** Any failure while opening, as a {@link StoreError} naming the store. */
export function openFailure(store: string, e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = new StoreError(`Cannot open store ${store}: ${describeStoreError(e)}`);
  err.cause = e;
  return err;
}
