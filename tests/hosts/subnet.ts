/**
 * IPv4 subnets for a network-namespace lab: parse the machine's routes, and
 * pick a private 10.A.B.0/24 per lab network that none of them covers, so an
 * address in a lab never means something on this machine as well.
 *
 * @module
 */

/** An IPv4 network: its first address as a 32-bit number, and its prefix length. */
export interface Cidr {
  base: number;
  bits: number;
}

/** Thrown for text that is not an IPv4 address or network. */
export class SubnetError extends Error {
  override name = "SubnetError";
}

/** Parses `a.b.c.d`; throws {@link SubnetError} naming the text. */
export function parseIpv4(text: string): number {
  const parts = text.split(".");
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) {
    throw new SubnetError(`Cannot parse IPv4 address: ${JSON.stringify(text)}`);
  }
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

/** Formats a 32-bit number as `a.b.c.d`. */
export function formatIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

/**
 * Parses `a.b.c.d/n` or a bare address (a /32), as `ip route` writes a
 * route's destination; the host bits are cleared.
 */
export function parseCidr(text: string): Cidr {
  const [addr, len, ...rest] = text.split("/");
  if (rest.length > 0 || (len !== undefined && !/^\d{1,2}$/.test(len))) {
    throw new SubnetError(`Cannot parse IPv4 network: ${JSON.stringify(text)}`);
  }
  const bits = len === undefined ? 32 : Number(len);
  if (bits > 32) {
    throw new SubnetError(`Cannot parse IPv4 network ${JSON.stringify(text)}: prefix over 32`);
  }
  return { base: mask(parseIpv4(addr), bits), bits };
}

/** Formats a network as `a.b.c.d/n`. */
export function formatCidr(c: Cidr): string {
  return `${formatIpv4(c.base)}/${c.bits}`;
}

function mask(n: number, bits: number): number {
  // 2^(32-bits) as a divisor keeps the arithmetic in doubles: `>>>` by 32 is a no-op.
  const size = 2 ** (32 - bits);
  return Math.floor(n / size) * size;
}

/** True when the two networks share an address (one contains the other). */
export function overlaps(a: Cidr, b: Cidr): boolean {
  const bits = Math.min(a.bits, b.bits);
  return mask(a.base, bits) === mask(b.base, bits);
}

/**
 * The destinations of `ip -j -4 route show table all`'s routes, except
 * default routes: a default route covers every address but reaches them
 * through a gateway, which is what a lab's isolation test shows it cannot.
 */
export function routeDestinations(json: string): Cidr[] {
  const text = json.trim();
  if (text === "") return [];
  let routes: unknown;
  try {
    routes = JSON.parse(text);
  } catch (e) {
    throw new SubnetError(`Cannot parse the output of ip -j route: ${String(e)}`);
  }
  if (!Array.isArray(routes)) {
    throw new SubnetError("Cannot parse the output of ip -j route: not a JSON array");
  }
  const out: Cidr[] = [];
  for (const [i, r] of routes.entries()) {
    const dst = (r as { dst?: unknown })?.dst;
    if (typeof dst !== "string") {
      throw new SubnetError(`Cannot parse the output of ip -j route: route #${i} has no dst`);
    }
    if (dst !== "default") out.push(parseCidr(dst));
  }
  return out;
}

/**
 * A 10.A.B.0/24 that overlaps none of `taken`, A and B drawn from `random`
 * (a function like `Math.random`); at most `attempts` draws.
 *
 * @throws {SubnetError} when every draw overlapped.
 */
export function pickSubnet(
  taken: readonly Cidr[],
  random: () => number = Math.random,
  attempts = 256,
): Cidr {
  for (let i = 0; i < attempts; i++) {
    const a = Math.floor(random() * 256) & 255;
    const b = Math.floor(random() * 256) & 255;
    const candidate = { base: parseIpv4(`10.${a}.${b}.0`), bits: 24 };
    if (!taken.some((t) => overlaps(t, candidate))) return candidate;
  }
  throw new SubnetError(
    `Cannot pick a lab subnet: ${attempts} random 10.x.y.0/24 all overlap this machine's routes` +
      ` (${taken.map(formatCidr).join(", ")})`,
  );
}

/** The `n`-th host address (1-based) of a /24, e.g. 10.1.2.3 for n = 3. */
export function hostAddress(subnet: Cidr, n: number): string {
  if (subnet.bits !== 24) {
    throw new SubnetError(`Cannot number hosts in ${formatCidr(subnet)}: not a /24`);
  }
  if (!Number.isInteger(n) || n < 1 || n > 254) {
    throw new SubnetError(
      `Cannot number host #${n} in ${formatCidr(subnet)}: a /24 holds hosts 1…254`,
    );
  }
  return formatIpv4(subnet.base + n);
}
