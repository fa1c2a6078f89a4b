/**
 * docs/deploy.md as a list of steps, so the multi-host rehearsal (issue #14)
 * runs the document itself rather than a copy of it. The document's
 * conventions, checked here:
 *
 * - Every fenced `sh` block starts with a line naming where it runs and
 *   its step: `# on: ROLE (STEP)`, ROLE one of {@link ROLES} (`gpu` is every
 *   GPU host, `all` every host).
 * - A block whose step is `variables` sets variables: it is run at the top
 *   of every block on its role (`all`: on every role), as a shell the
 *   operator keeps open would have them.
 * - A block whose only command is `systemctl enable --now llmgw-X.service`
 *   starts a unit; the rehearsal runs the installed unit's `ExecStart`
 *   instead (systemd_unit.ts). `systemctl` anywhere else is refused: the
 *   rehearsal could not follow it.
 * - `# copy (STEP): FILE… from ROLE to ROLE…` blocks move files between
 *   hosts' working directories; their body (scp lines) is for people.
 *
 * Other fenced blocks (yaml, json, text) are not steps.
 *
 * @module
 */

/** The roles a block may name. */
export const ROLES = ["all", "control", "gpu", "gateway", "client", "prometheus"] as const;

/** A role a block runs on. */
export type Role = typeof ROLES[number];

/** One step of the runbook. */
export type RunbookStep =
  | { kind: "run"; role: Role; step: string; script: string; line: number }
  | { kind: "start"; role: Role; step: string; unit: string; line: number }
  | { kind: "copy"; step: string; from: Role; to: Role[]; files: string[]; line: number };

/** A parsed runbook: its steps in order and its variable blocks. */
export interface Runbook {
  /** Steps other than `variables`, in document order. */
  steps: RunbookStep[];
  /** The `variables` blocks' scripts by role, `all` included. */
  variables: Partial<Record<Role, string>>;
}

/** Thrown for a runbook that breaks its conventions; the message names the line. */
export class RunbookError extends Error {
  override name = "RunbookError";
}

const STEP = /^[a-z][a-z0-9-]*$/;
const ON = /^# on: ([a-z]+) \(([^)]*)\)\s*$/;
const COPY = /^# copy \(([^)]*)\): (.+) from ([a-z]+) to ([a-z ]+?)\s*$/;
const START = /^systemctl enable --now (llmgw-[a-z]+\.service)$/;
const FILE = /^[A-Za-z0-9._-]+$/;

function role(text: string, where: string): Role {
  if (!(ROLES as readonly string[]).includes(text)) {
    throw new RunbookError(`${where}: unknown role "${text}" (known: ${ROLES.join(", ")})`);
  }
  return text as Role;
}

function stepName(text: string, where: string): string {
  if (!STEP.test(text)) {
    throw new RunbookError(
      `${where}: step "${text}" must be a lower-case letter then letters, digits or '-'`,
    );
  }
  return text;
}

/** The fenced blocks of `markdown`: info string, body, line of the opening fence. */
function fencedBlocks(markdown: string, where: string) {
  const blocks: { info: string; body: string[]; line: number }[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(```+|~~~+)\s*([^\s`]*)/.exec(lines[i]);
    if (open === null) continue;
    const [, indent, fence, info] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      if (lines[j].trim().startsWith(fence) && lines[j].trim().replace(/[`~]/g, "") === "") break;
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    }
    if (j >= lines.length) {
      throw new RunbookError(`${where}:${i + 1}: the fenced block never closes`);
    }
    blocks.push({ info, body, line: i + 1 });
    i = j;
  }
  return blocks;
}

/**
 * Parses docs/deploy.md's `sh` blocks into steps (see the module doc).
 *
 * @throws {RunbookError} For a block without its `# on:` or `# copy` line,
 * an unknown role, a step name used twice, or a `systemctl` the rehearsal
 * cannot follow.
 */
export function parseRunbook(markdown: string, where: string): Runbook {
  const steps: RunbookStep[] = [];
  const variables: Partial<Record<Role, string>> = {};
  const seen = new Set<string>();
  for (const block of fencedBlocks(markdown, where)) {
    if (block.info !== "sh") continue;
    const at = `${where}:${block.line}`;
    const [first = "", ...rest] = block.body;
    const copy = COPY.exec(first);
    if (copy !== null) {
      const step = stepName(copy[1], at);
      const files = copy[2].trim().split(/\s+/);
      for (const f of files) {
        if (!FILE.test(f)) {
          throw new RunbookError(`${at}: copy "${f}": a file name in the working directory`);
        }
      }
      if (seen.has(step)) throw new RunbookError(`${at}: step "${step}" appears twice`);
      seen.add(step);
      steps.push({
        kind: "copy",
        step,
        from: role(copy[3], at),
        to: copy[4].trim().split(/\s+/).map((r) => role(r, at)),
        files,
        line: block.line,
      });
      continue;
    }
    const on = ON.exec(first);
    if (on === null) {
      throw new RunbookError(
        `${at}: an sh block must start with "# on: ROLE (STEP)" or "# copy (STEP): FILES from ROLE to ROLES", got ${
          JSON.stringify(first)
        }`,
      );
    }
    const r = role(on[1], at);
    const step = stepName(on[2], at);
    const script = rest.join("\n").trimEnd() + "\n";
    if (step === "variables") {
      if (variables[r] !== undefined) {
        throw new RunbookError(`${at}: role ${r} has a second variables block`);
      }
      variables[r] = script;
      continue;
    }
    if (seen.has(step)) throw new RunbookError(`${at}: step "${step}" appears twice`);
    seen.add(step);
    const commands = rest.map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
    const start = commands.length === 1 ? START.exec(commands[0]) : null;
    if (start !== null) {
      steps.push({ kind: "start", role: r, step, unit: start[1], line: block.line });
      continue;
    }
    if (/(^|[\s;&|(])systemctl\s/m.test(rest.join("\n"))) {
      throw new RunbookError(
        `${at}: step ${step}: put "systemctl enable --now UNIT" alone in its block; the rehearsal runs the unit's ExecStart there and can follow no other systemctl`,
      );
    }
    if (commands.length === 0) throw new RunbookError(`${at}: step ${step} has no command`);
    steps.push({ kind: "run", role: r, step, script, line: block.line });
  }
  return { steps, variables };
}

/** The variable blocks a step on `role` starts with: `all`'s, then the role's own. */
export function preludeFor(book: Runbook, r: Role): string {
  return [book.variables.all, r === "all" ? undefined : book.variables[r]]
    .filter((s) => s !== undefined).join("");
}
