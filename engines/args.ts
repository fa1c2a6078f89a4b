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

/**
 * Compares dotted versions numerically ("0.9.2" < "0.11.0"). Pre-release
 * suffixes are ignored, unless `preReleases` is `"below"`: then a
 * pre-release or development release of a version (PEP 440's `a`, `b`,
 * `rc`, `.dev`, in any of its spellings) counts below it, as PEP 440 orders
 * them (`0.5.3rc0` < `0.5.3`). A gate on a feature first released in a
 * version takes `"below"` when it cannot tell which pre-releases had it.
 */
export function compareVersions(
  a: string,
  b: string,
  opts: { preReleases?: "ignored" | "below" } = {},
): number {
  const below = opts.preReleases === "below";
  // With pre-releases below, only the release segment is compared numerically.
  const parse = (v: string) =>
    (below ? releaseOf(v) : v.replace(/^v/, "")).split(/[.+-]/).map((p) => parseInt(p, 10));
  const pa = parse(a);
  const pb = parse(b);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = Number.isNaN(pa[i]) || pa[i] === undefined ? 0 : pa[i];
    const y = Number.isNaN(pb[i]) || pb[i] === undefined ? 0 : pb[i];
    if (x !== y) return x - y;
  }
  return below ? Number(isPreRelease(b)) - Number(isPreRelease(a)) : 0;
}

/** The release segment, `0.5.3` of `v0.5.3rc1+cu128`. */
function releaseOf(version: string): string {
  return version.replace(/^v/i, "").match(/^\d+(?:\.\d+)*/)?.[0] ?? "";
}

/** A PEP 440 pre-release or dev marker right after the release segment (before any `+local`). */
function isPreRelease(version: string): boolean {
  const rest = version.replace(/^v/i, "").split("+")[0].slice(releaseOf(version).length);
  return /^[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|dev)/i.test(rest);
}
