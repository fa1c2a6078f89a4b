/**
 * bench/gateway_fixed.ts (same arguments), collecting its garbage on SIGUSR2
 * when run with `--v8-flags=--expose-gc` (bench/gc_on_signal.ts).
 */
import "./gc_on_signal.ts";
import "./gateway_fixed.ts";
