/**
 * A control plane for the admin CLI's tests (plain HTTP, memory store, no
 * reconcile timer) and a way to run `llmgw` against it with an admin token,
 * capturing what it prints.
 *
 * @module
 */
import { main } from "../cli/main.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";

/** A running control plane, as {@link startControl} answers. */
export type AdminControl = Awaited<ReturnType<typeof startControl>>;

/** What one CLI run exited with and printed. */
export interface CliRun {
  /** The exit code. */
  code: number;
  /** Standard output. */
  out: string;
  /** Standard error. */
  err: string;
}

/** The admin token the fixture's control plane takes for a test named `name`. */
export function adminToken(name: string): string {
  return `llmgw_admin_${name}`;
}

/**
 * Runs `fn` against a fresh control plane that takes the admin token of
 * `name`, and closes it after, on failure too.
 */
export async function withAdminControl(
  name: string,
  fn: (url: string, control: AdminControl) => Promise<void>,
): Promise<void> {
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [adminToken(name)],
    joinTokens: [`llmgw_join_${name}`],
    reconcileMs: 3_600_000,
  });
  try {
    await fn(control.url, control);
  } finally {
    await control.close();
  }
}

/** Runs `llmgw ARGS --url URL --token TOKEN` in process. */
export async function runCli(url: string, token: string, ...args: string[]): Promise<CliRun> {
  let out = "";
  let err = "";
  const code = await main([...args, "--url", url, "--token", token], {
    out: (t) => out += t,
    err: (t) => err += t,
  });
  return { code, out, err };
}
