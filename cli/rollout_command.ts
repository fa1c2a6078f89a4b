/**
 * `llmgw rollout status|history|undo DEPLOYMENT` (design §6.3): a
 * deployment's rolling update as the control plane reports it, its
 * revisions, and going back to an older one. Talks to the admin API through
 * the call it is given; prints through `out`.
 *
 * @module
 */
import {
  type RevisionListing,
  RevisionListSchema,
  type RolloutStatusAnswer,
  RolloutStatusSchema,
  UndoAnswer,
} from "../protocol/admin_protocol.ts";
import { adminAnswer } from "./admin_client.ts";
import { shortCommit } from "../deployment/model_revision.ts";
import { cutAtWord, renderTable } from "../text/table.ts";
import { durationMs } from "./duration.ts";
import { watchArgs, watchRollout, watchValue } from "./rollout_watch.ts";
import { parseFlags, UsageError } from "./usage_error.ts";
import type { WaitOptions } from "./wait.ts";

/** The help text of `llmgw rollout`. */
export const ROLLOUT_USAGE = `Usage: llmgw rollout status|history|undo DEPLOYMENT [flags]

A changed deployment (anything but its replica count) is a new revision,
rolled out one replica at a time: a new replica starts first when capacity
is free, else one old replica is taken down at a time; each step waits for
readiness, and a step past the progress deadline reverts to the previous
revision.

  status DEPLOYMENT                  waits until the rollout is done (exit 0) or
                                     failed (exit 1), a line per change;
                                     --watch=false: the revision, the step under way,
                                     its deadline, and replicas by revision, at once
  history DEPLOYMENT                 the deployment's recent revisions
  undo DEPLOYMENT [--to-revision N]  roll out an older revision's spec as a new
                                     revision (default: the previous one)

Flags:
  --json            print the control plane's answer as JSON
  --to-revision N   (undo) the revision whose spec comes back
  --watch=false     (status) a snapshot instead of waiting
  --timeout D       (status) stop waiting after D (90s, 10m, 1h; default 0: no limit)
  -h, --help        this help; \`llmgw rollout SUBCOMMAND --help\` for one subcommand
`;

const SUBCOMMAND_USAGE: Record<string, string> = {
  status: `Usage: llmgw rollout status DEPLOYMENT [--watch=false] [--timeout D] [--json]

Waits until the deployment's rollout is done: every replica on the current
revision and ready (exit 0), printing a line each time the progress
changes. Exits 1 when the revision failed (the progress deadline passed and
the previous spec is rolling back) or its replicas stay failed, and when
--timeout runs out; the rollout itself goes on. A revision applied
meanwhile is followed.

  --watch=false   print the status once and exit: the current revision,
                  the rollout under way with its step (which replica is
                  being replaced by which) and deadline, and how many
                  replicas of each revision there are and are ready
  --timeout D     stop waiting after D, e.g. 90s, 10m, 1h (default 0: no limit;
                  Ctrl-C stops too)
`,
  history: `Usage: llmgw rollout history DEPLOYMENT [--json]

Lists the deployment's recent revisions, oldest first, with what made each
(an apply, an undo, an automatic revert) and how it fared. * marks the
current one.
`,
  undo: `Usage: llmgw rollout undo DEPLOYMENT [--to-revision N] [--json]

Rolls out an older revision's spec as a new revision, at today's replica
count. Without --to-revision: the newest earlier revision that runs
something else.
`,
};

/** The flags of every subcommand; connection flags are the admin CLI's and are ignored here. */
const FLAGS = {
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  "to-revision": { type: "string" },
  watch: { type: "string" },
  timeout: { type: "string" },
  url: { type: "string" },
  token: { type: "string" },
  "token-file": { type: "string" },
} as const;

/** Where `rollout status` reports failures, and how it waits. */
export interface RolloutOptions {
  /** Standard error (default: the process's). */
  err?: (t: string) => void;
  /** Between two reads while waiting, and what ends the wait early (tests). */
  wait?: Pick<WaitOptions, "intervalMs" | "signal">;
}

/**
 * Runs `llmgw rollout ARGS`; returns the exit code.
 *
 * @throws {UsageError} One line naming the subcommand, flag or argument, and the fix.
 */
export async function rolloutCommand(
  call: (method: string, path: string, body?: unknown) => Promise<unknown>,
  args: string[],
  out: (t: string) => void,
  options: RolloutOptions = {},
): Promise<number> {
  const { values, positionals } = parseFlags("rollout", watchArgs(args), FLAGS);
  const [sub, name, ...extra] = positionals;
  if (sub === undefined) {
    if (values.help) {
      out(ROLLOUT_USAGE);
      return 0;
    }
    throw new UsageError(
      "rollout: name a subcommand: status, history or undo (llmgw rollout --help)",
      "rollout",
    );
  }
  const usage = SUBCOMMAND_USAGE[sub];
  if (usage === undefined) {
    throw new UsageError(
      `rollout: unknown subcommand "${sub}"; use status, history or undo`,
      "rollout",
    );
  }
  if (values.help) {
    out(usage);
    return 0;
  }
  const command = `rollout ${sub}`;
  if (name === undefined) {
    throw new UsageError(
      `${command}: name a deployment, e.g. llmgw ${command} llama-8b`,
      "rollout",
    );
  }
  if (extra.length > 0) {
    throw new UsageError(
      `${command}: unexpected argument "${extra[0]}"; name one deployment`,
      "rollout",
    );
  }
  const toRevision = values["to-revision"];
  if (toRevision !== undefined && sub !== "undo") {
    throw new UsageError(
      `${command}: --to-revision is for rollout undo; leave it out`,
      "rollout",
    );
  }
  for (const flag of ["watch", "timeout"] as const) {
    if (values[flag] !== undefined && sub !== "status") {
      throw new UsageError(`${command}: --${flag} is for rollout status; leave it out`, "rollout");
    }
  }
  const watch = watchValue(values.watch);
  const timeoutMs = values.timeout === undefined ? 0 : durationMs(values.timeout);
  if (timeoutMs === null) {
    throw new UsageError(
      `${command}: --timeout must be a duration such as 90s, 10m or 1h, got "${values.timeout}"`,
      "rollout",
    );
  }
  const path = `/v1/deployments/${encodeURIComponent(name)}`;
  switch (sub) {
    case "status": {
      if (watch) {
        return await watchRollout(call, name, {
          json: values.json === true,
          out,
          err: options.err ?? ((t) => Deno.stderr.writeSync(new TextEncoder().encode(t))),
          wait: { intervalMs: 1_000, ...options.wait, timeoutMs },
        });
      }
      const status = await adminAnswer(call, RolloutStatusSchema, "GET", `${path}/rollout`);
      out(values.json ? json(status) : statusText(status));
      return 0;
    }
    case "history": {
      const answer = await adminAnswer(call, RevisionListSchema, "GET", `${path}/revisions`);
      out(values.json ? json(answer) : historyText(answer.revision, answer.revisions));
      return 0;
    }
    default: {
      const body = toRevision === undefined ? {} : { to_revision: revisionNumber(toRevision) };
      const answer = await adminAnswer(call, UndoAnswer, "POST", `${path}/rollout/undo`, body);
      out(
        values.json ? json(answer) : `deployment ${answer.deployment}: revision ` +
          `${answer.from_revision}'s spec is rolling out as revision ${answer.revision}\n`,
      );
      return 0;
    }
  }
}

/** `--to-revision`'s value as a revision number. */
function revisionNumber(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(
      `rollout undo: --to-revision "${text}": expected a revision number such as 2 ` +
        "(see llmgw rollout history)",
      "rollout",
    );
  }
  return n;
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function time(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The status in words and tables. */
export function statusText(s: RolloutStatusAnswer): string {
  const lines: string[] = [];
  const r = s.rollout;
  if (r === null) {
    lines.push(`deployment ${s.deployment}: revision ${s.revision}, rollout complete`);
  } else {
    lines.push(
      `deployment ${s.deployment}: rolling out revision ${r.target}` +
        (r.fallback === null
          ? " (an automatic revert)"
          : ` (back to revision ${r.fallback} if it fails)`),
    );
    const step = r.step === null
      ? "between steps"
      : r.step.mode === "surge"
      ? `replacing ${r.step.replaced} by ${r.step.by}, started first`
      : `replacing ${r.step.replaced} in place`;
    const p = s.prepull ?? null;
    if (p !== null) {
      lines.push(
        `pre-pulling ${p.model}@${shortCommit(p.commit)} before any replica stops: ` +
          `${p.held.length}/${p.nodes.length} nodes hold it (${
            p.nodes.map((n) =>
              `${n} ${
                p.held.includes(n)
                  ? "held"
                  : p.failed.includes(n)
                  ? "failed"
                  : p.cancelled.includes(n)
                  ? "cancelled"
                  : "fetching"
              }`
            ).join(", ")
          }); replacing anyway at ${time(p.until)}`,
      );
    } else {
      lines.push(
        `step ${r.steps + (r.step === null ? 0 : 1)}: ${step}; ` +
          (r.deadline_at === null ? "no deadline" : `deadline ${time(r.deadline_at)}`),
      );
    }
  }
  lines.push(`ready ${s.ready}/${s.desired}, on revision ${s.revision}: ${s.updated}/${s.desired}`);
  lines.push("");
  lines.push(renderTable(
    ["REVISION", "REPLICAS", "READY"],
    s.replicas_by_revision.map((c) => [String(c.revision), String(c.replicas), String(c.ready)]),
  ));
  if (s.replicas.length > 0) {
    lines.push("");
    lines.push(renderTable(
      ["REPLICA", "REVISION", "STATE"],
      s.replicas.map((x) => [x.id, String(x.revision), x.state]),
    ));
  }
  return `${lines.join("\n").replace(/\n+$/, "")}\n`;
}

/** The history as a table, the current revision marked. */
export function historyText(current: number, revisions: readonly RevisionListing[]): string {
  const cause = (h: RevisionListing) =>
    h.cause === "apply"
      ? "apply"
      : `${h.cause === "undo" ? "undo to" : "revert to"} ${h.from_revision}`;
  return `${
    renderTable(
      ["REVISION", "APPLIED", "CAUSE", "OUTCOME", "MODEL", "REASON"],
      revisions.map((h) => [
        `${h.revision}${h.revision === current ? "*" : ""}`,
        time(h.applied_at),
        cause(h),
        h.outcome,
        h.spec.model ?? "",
        // One line each: the full reason is in --json.
        cutAtWord((h.reason ?? "").replace(/\s*\n\s*/g, " "), 72),
      ]),
    ).replace(/\n+$/, "")
  }\n`;
}
