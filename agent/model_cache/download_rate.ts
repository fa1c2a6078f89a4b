/**
 * The value of `--download-rate`: bytes per second, as operators write it
 * (`200MB/s`, `1.5GiB/s`, `800Mbit/s`, `50M`), or `0` / `unlimited` for no
 * limit.
 *
 * @module
 */

/** A `--download-rate` value that cannot be read. */
export class DownloadRateError extends Error {
  /** `message` names the flag and what was wrong. */
  constructor(message: string) {
    super(message);
    this.name = "DownloadRateError";
  }
}

const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
  kbit: 1e3 / 8,
  mbit: 1e6 / 8,
  gbit: 1e9 / 8,
};

/**
 * Bytes per second, or null for no limit. Units: B, K/KB, M/MB, G/GB, T/TB
 * (powers of 1000), KiB … TiB (powers of 1024), Kbit … Gbit (bits), each
 * with an optional `/s`; case does not matter.
 */
export function parseDownloadRate(text: string, where = "--download-rate"): number | null {
  const value = text.trim();
  if (value === "") throw new DownloadRateError(`Cannot parse ${where}: value is empty`);
  if (/^(unlimited|none|off|0)$/i.test(value)) return null;
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)(\/s)?$/i.exec(value);
  if (m === null) {
    throw new DownloadRateError(
      `Cannot parse ${where}: ${JSON.stringify(value)} is not a rate like 200MB/s, 1GiB/s, ` +
        "800Mbit/s or unlimited",
    );
  }
  const unit = UNITS[m[2].toLowerCase()];
  if (unit === undefined) {
    throw new DownloadRateError(
      `Cannot parse ${where}: unknown unit ${JSON.stringify(m[2])} ` +
        "(use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, Kbit, Mbit or Gbit)",
    );
  }
  const bytes = Number(m[1]) * unit;
  if (bytes === 0) return null;
  if (bytes < 1) throw new DownloadRateError(`Cannot parse ${where}: ${value} is under 1 byte/s`);
  return Math.floor(bytes);
}
