/**
 * For bench/gateway_streams.ts: when the process runs with
 * `--v8-flags=--expose-gc`, SIGUSR2 runs a full garbage collection, so the
 * bench can read resident memory without the garbage that happens to be
 * waiting for the collector. Without the flag, importing this does nothing.
 *
 * @module
 */
const gc = (globalThis as { gc?: () => void }).gc;
if (gc !== undefined) Deno.addSignalListener("SIGUSR2", () => gc());
