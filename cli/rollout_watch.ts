/**
 * `llmgw rollout status DEPLOYMENT` waiting, as `kubectl rollout status`
 * does: a line each time the progress changes, then success (exit 0) once
 * every replica runs the current revision and is ready, or failure (exit 1)
 * when the revision failed and was reverted, or replicas of it stay failed.
 * A newer revision applied meanwhile is followed. `--watch=false` prints a
 * snapshot instead; `--timeout` bounds the wait (docs/cli.md).
 *
 * @module
 */
import {
  RevisionListSchema,
  type RolloutStatusAnswer,
  RolloutStatusSchema,
} from "../protocol/admin_protocol.ts";
import { adminAnswer, type AdminCall } from "./admin_client.ts";
import { UsageError } from "./usage_error.ts";
import { type WaitOptions, waitUntil } from "./wait.ts";

/** Reads in a row that must show a replica of the current revision failed before it counts. */
export const FAILED_READS = 3;

/**
 * Rewrites `--watch` and `-w` to `--watch=true`, so the flag reads as a
 * string and `--watch=false` parses (node:util booleans take no value).
 */
export function watchArgs(args: readonly string[]): string[] {
  return args.map((a) => a === "--watch" || a === "-w" ? "--watch=true" : a);
}

/**
 * `--watch`'s value: true unless `false`.
 *
 * @throws {UsageError} For a value other than true or false.
 */
export function watchValue(text: string | undefined): boolean {
  if (text === undefined || text === "true") return true;
  if (text === "false") return false;
  throw new UsageError(`rollout status: --watch must be true or false, got "${text}"`, "rollout");
}

/** Where the watch prints, and how it waits. */
export interface WatchOptions {
  /** Print the last status as JSON at the end instead of lines. */
  json: boolean;
  /** Standard output. */
  out: (text: string) => void;
  /** Standard error. */
  err: (text: string) => void;
  /** Pace and limit. */
  wait: WaitOptions;
}

/** One line of progress. */
export function progressLine(s: RolloutStatusAnswer): string {
  const r = s.rollout;
  const step = r?.step ?? null;
  const doing = step === null
    ? ""
    : step.mode === "surge"
    ? `; replacing ${step.replaced} by ${step.by}`
    : `; replacing ${step.replaced} in place`;
  return `deployment ${s.deployment}: waiting for revision ${s.revision}: ` +
    `${s.updated}/${s.desired} updated, ${s.ready}/${s.desired} ready${doing}`;
}

/** True once every replica runs the current revision and is ready, with no rollout under way. */
export function rolledOut(s: RolloutStatusAnswer): boolean {
  return s.rollout === null && s.updated >= s.desired && s.ready >= s.desired &&
    s.replicas.every((r) => r.revision === s.revision && r.state === "ready");
}

/** Waits for the deployment's rollout; returns the exit code. */
export async function watchRollout(
  call: AdminCall,
  name: string,
  o: WatchOptions,
): Promise<number> {
  const path = `/v1/deployments/${encodeURIComponent(name)}`;
  let watched: number | null = null;
  let failedReads = 0;
  let verdict: { failed: string } | null = null;
  let last = "";
  const read = () => adminAnswer(call, RolloutStatusSchema, "GET", `${path}/rollout`);
  const judge = async (s: RolloutStatusAnswer): Promise<boolean> => {
    if (watched !== null && s.revision !== watched) {
      const { revisions } = await adminAnswer(
        call,
        RevisionListSchema,
        "GET",
        `${path}/revisions`,
      );
      const was = revisions.find((h) => h.revision === watched);
      if (was?.outcome === "failed") {
        verdict = {
          failed: `revision ${watched} failed${was.reason ? `: ${was.reason}` : ""}; ` +
            `revision ${s.revision} brings the previous spec back`,
        };
        return true;
      }
      if (!o.json) o.out(`deployment ${name}: revision ${s.revision} replaced ${watched}\n`);
    }
    watched = s.revision;
    const failing = s.rollout === null &&
      s.replicas.filter((r) => r.revision === s.revision && r.state === "failed");
    failedReads = failing && failing.length > 0 ? failedReads + 1 : 0;
    if (failing && failedReads >= FAILED_READS) {
      verdict = {
        failed: `${failing.map((r) => r.id).join(", ")} of revision ${s.revision} failed ` +
          `(llmgw describe replica ${failing[0].id})`,
      };
      return true;
    }
    return rolledOut(s);
  };
  const result = await waitUntil(
    async () => {
      const s = await read();
      return { s, finished: await judge(s) };
    },
    (x) => x.finished,
    o.wait,
    ({ s }) => {
      const line = progressLine(s);
      if (!o.json && !rolledOut(s) && line !== last) o.out(`${line}\n`);
      last = line;
    },
  );
  const s = result.value.s;
  if (o.json) o.out(`${JSON.stringify(s, null, 2)}\n`);
  const failed = (verdict as { failed: string } | null)?.failed;
  if (failed !== undefined) {
    o.err(`llmgw: rollout status: deployment ${name}: ${failed}\n`);
    return 1;
  }
  if (result.outcome === "done") {
    if (!o.json) {
      o.out(
        `deployment ${name} successfully rolled out (revision ${s.revision}, ` +
          `${s.ready}/${s.desired} ready)\n`,
      );
    }
    return 0;
  }
  o.err(
    `llmgw: rollout status: deployment ${name} not rolled out ${
      result.outcome === "timeout" ? "when --timeout ran out" : "when stopped"
    }: ${s.updated}/${s.desired} updated, ${s.ready}/${s.desired} ready\n`,
  );
  return 1;
}
