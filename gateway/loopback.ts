/**
 * Loopback addresses: where an open gateway (no API keys) may be used from
 * (design §12).
 *
 * @module
 */

/** Whether `host` (a name or an address, IPv4-mapped included) is loopback. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/.test(h);
}
