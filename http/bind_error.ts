/**
 * Failures to listen, said in one line that names the address, the port and,
 * where /proc can tell, who holds it (design §11.2): "Address already in use
 * (os error 98)" alone leaves the operator to guess which of a role's
 * listeners clashed and with what.
 *
 * {@link formatBindError} is the pure core; {@link bindErrorFrom} turns the
 * error `Deno.serve`/`Deno.listen` threw into a {@link BindError}, looking the
 * holder up only when the address is in use.
 *
 * @module
 */
import {
  describeHolders,
  type PortHolder,
  portHolders as procPortHolders,
} from "../supervisor/listen_owner.ts";
import { errorMessage } from "../text/error_message.ts";

/** Who holds the port, as far as the failure could tell. */
export type BindHolder =
  /** The processes /proc shows listening on the port (empty: none found). */
  | { kind: "found"; holders: PortHolder[] }
  /** /proc could not be read; `reason` says why. */
  | { kind: "unknown"; reason: string }
  /** Not looked up: the failure was not "address in use". */
  | { kind: "not_looked" };

/** A listener that could not bind. */
export interface BindFailure {
  /** What was to listen, e.g. `the control API`. */
  what: string;
  /** The address asked for (`127.0.0.1`, `::1`, `0.0.0.0`, a host name). */
  address: string;
  /** The port asked for. */
  port: number;
  /** Why, in words: `address already in use`, `address not available on this host`, … */
  reason: string;
  /** Who holds the port. */
  holder: BindHolder;
}

/** `address:port`, IPv6 addresses in brackets. */
export function hostPort(address: string, port: number): string {
  return address.includes(":") && !address.startsWith("[")
    ? `[${address}]:${port}`
    : `${address}:${port}`;
}

/**
 * The one line for a failure to bind, e.g. `Cannot listen on 127.0.0.1:7070
 * for the control API: address already in use by pid 4242 (deno run …)`.
 */
export function formatBindError(f: BindFailure): string {
  return oneLine(bindErrorText(f));
}

function bindErrorText(f: BindFailure): string {
  const head = `Cannot listen on ${hostPort(f.address, f.port)} for ${f.what}: ${f.reason}`;
  switch (f.holder.kind) {
    case "not_looked":
      return head;
    case "unknown":
      return `${head}; the holder is unknown (${f.holder.reason})`;
    case "found":
      return f.holder.holders.length === 0
        ? `${head}; /proc shows no process listening on port ${f.port} ` +
          `(a socket bound without listening, or one that just closed)`
        : `${head} by ${describeHolders(f.holder.holders)}`;
  }
}

/** Newlines (in a command line, an OS message) would split the one line. */
function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, " ");
}

/** A listener could not bind; the message is {@link formatBindError}'s line. */
export class BindError extends Error {
  /** The address asked for. */
  readonly address: string;
  /** The port asked for. */
  readonly port: number;
  /** Who holds the port. */
  readonly holder: BindHolder;

  /** Creates the error from what failed. */
  constructor(failure: BindFailure, options?: ErrorOptions) {
    super(formatBindError(failure), options);
    this.name = "BindError";
    this.address = failure.address;
    this.port = failure.port;
    this.holder = failure.holder;
  }
}

/** Reads who listens on a port; throws when it cannot tell (the default reads /proc). */
export type HolderLookup = (port: number) => PortHolder[];

/**
 * The holders from /proc, when this process may read it: a role running
 * without read permission (the gateway) must not stop at a permission
 * prompt in the middle of reporting a failure.
 */
function procHolders(port: number): PortHolder[] {
  if (Deno.permissions.querySync({ name: "read", path: "/proc" }).state !== "granted") {
    throw new Error("this process may not read /proc");
  }
  return procPortHolders(port);
}

/**
 * The {@link BindError} for `e`, an error thrown by `Deno.serve` or
 * `Deno.listen` (or `node:https`) for `address:port`. The holder is looked up (with `lookup`,
 * default /proc) only when the address is in use; a lookup that fails
 * makes the holder unknown, never a second error.
 */
export function bindErrorFrom(
  e: unknown,
  what: string,
  address: string,
  port: number,
  lookup: HolderLookup = procHolders,
): BindError {
  const failure = (reason: string, holder: BindHolder): BindError =>
    new BindError({ what, address, port, reason, holder }, { cause: e });
  // node:https (the TLS listeners) reports errno codes instead of Deno's classes.
  const code = (e as { code?: unknown } | null)?.code;
  if (e instanceof Deno.errors.AddrInUse || code === "EADDRINUSE") {
    let holder: BindHolder;
    try {
      holder = { kind: "found", holders: lookup(port) };
    } catch (err) {
      holder = { kind: "unknown", reason: errorMessage(err) };
    }
    return failure("address already in use", holder);
  }
  if (e instanceof Deno.errors.AddrNotAvailable || code === "EADDRNOTAVAIL") {
    return failure("address not available on this host", { kind: "not_looked" });
  }
  if (e instanceof Deno.errors.PermissionDenied) {
    return failure(
      port < 1024 ? "permission denied (ports below 1024 need privileges)" : "permission denied",
      { kind: "not_looked" },
    );
  }
  return failure(errorMessage(e), { kind: "not_looked" });
}

/**
 * Checks that `address:port` can be listened on now, by listening and
 * closing at once: a command that starts several listeners checks them all
 * before starting any, so a clash stops it before anything ran.
 *
 * @throws {BindError} When it cannot.
 */
export function assertBindable(
  what: string,
  address: string,
  port: number,
  lookup?: HolderLookup,
): void {
  let listener: Deno.TcpListener;
  try {
    listener = Deno.listen({ hostname: address, port });
  } catch (e) {
    throw bindErrorFrom(e, what, address, port, lookup);
  }
  listener.close();
}
