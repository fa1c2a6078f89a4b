/**
 * Helpers for engine command lines: refusing extra arguments that set a flag
 * llmgw owns, instead of producing a conflicting command line (design §8).
 *
 * @module
 */

/**
 * Finds extra arguments that set one of `owned` (long flags like
 * `--port`, short ones like `-tp`). `--flag=value` counts, and so does any
 * unambiguous prefix of a long flag (`--tensor-parallel`), since Python's
 * argparse accepts abbreviations.
 */
export function ownedFlagProblems(
  profile: string,
  engine: string,
  args: readonly string[],
  owned: readonly string[],
): string[] {
  const problems: string[] = [];
  for (const arg of args) {
    if (!arg.startsWith("-") || arg === "-" || arg === "--") continue;
    const flag = arg.split("=")[0];
    const hit = owned.find((o) =>
      o === flag || (flag.startsWith("--") && flag.length > 3 && o.startsWith(flag))
    );
    if (hit !== undefined) {
      problems.push(
        `profile "${profile}": engine_args sets ${hit}, which llmgw sets for ${engine} from the profile and placement; remove "${arg}"`,
      );
    }
  }
  return problems;
}

/** Compares dotted versions numerically ("0.9.2" < "0.11.0"); pre-release suffixes are ignored. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => v.replace(/^v/, "").split(/[.+-]/).map((p) => parseInt(p, 10));
  const pa = parse(a);
  const pb = parse(b);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = Number.isNaN(pa[i]) || pa[i] === undefined ? 0 : pa[i];
    const y = Number.isNaN(pb[i]) || pb[i] === undefined ? 0 : pb[i];
    if (x !== y) return x - y;
  }
  return 0;
}
