/**
 * Waiting on the rehearsal's processes (rehearsal_test.ts): for a log line,
 * for a client burst's first answer and its summary, and the tails of every
 * service log for a failure's message. Every wait is bounded.
 *
 * @module
 */
import { join } from "node:path";
import { until } from "../until.ts";
import type { LabProcess } from "./lab.ts";
import { endsWithin } from "./lab_process.ts";

/** How long the rehearsal waits for a step, and how often it looks: starting Denos on two shared cores is slow. */
export const WAIT = { timeoutMs: 60_000, intervalMs: 250 };

/** The last lines of every service log, for a failure's message. */
export async function logTails(dir: string): Promise<string> {
  const out: string[] = [];
  for await (const host of Deno.readDir(dir)) {
    if (!host.isDirectory) continue;
    for await (const f of Deno.readDir(join(dir, host.name))) {
      if (!f.name.endsWith(".log")) continue;
      const lines = (await Deno.readTextFile(join(dir, host.name, f.name))).trimEnd().split("\n");
      out.push(`--- ${host.name}/${f.name} (last 25 lines)`, ...lines.slice(-25));
    }
  }
  return out.join("\n");
}

/** Waits until `p` has logged `text`; fails early when it exits. */
export async function waitForLog(p: LabProcess, text: string, what: string): Promise<void> {
  await until(what, async () => {
    const log = await p.readLog();
    if (log.includes(text)) return true;
    if (p.exited) throw new Error(`${p.command[0]} exited: ${log.slice(-2000)}`);
    return false;
  }, { ...WAIT, describe: () => `log ${p.log}` });
}

/** Waits until a burst has had its first answer: it is under way. */
export async function firstAnswer(p: LabProcess): Promise<void> {
  await until("the client's first answer", async () => (await p.readLog()).includes('"i"'), WAIT);
}

/** What a burst of the client said: its counts and its lines (for messages). */
export async function finished(
  p: LabProcess,
): Promise<{ ok: number; failed: number; lines: string }> {
  if (!(await endsWithin(p.status, 180_000))) throw new Error("the client did not finish");
  const log = await p.readLog();
  const last = log.trimEnd().split("\n").pop() ?? "";
  let summary: { ok?: number; failed?: number };
  try {
    summary = JSON.parse(last);
  } catch {
    throw new Error(`the client printed no summary: ${log}`);
  }
  if (typeof summary.ok !== "number" || typeof summary.failed !== "number") {
    throw new Error(`the client printed no summary: ${log}`);
  }
  const failures = log.split("\n").filter((l) =>
    l.includes('"error"') || /"status":(?!200)/.test(l)
  );
  return { ok: summary.ok, failed: summary.failed, lines: failures.join("\n") };
}
