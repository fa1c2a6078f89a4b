/**
 * The port layout of `llmgw dev` (design §3): every port a cluster uses
 * derives from its `--port P` and lies in P…P+999, so two clusters whose
 * `--port` values are a span apart share none.
 *
 * @module
 */
import { PORT_BLOCK } from "../engines/port_block.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";
import { UsageError } from "./usage_error.ts";

/** The simulated cluster: node id → simulated machine. */
export const DEV_NODES: readonly [string, string][] = [
  ["h100-a", "dgx_h100_idle"],
  ["h100-b", "dgx_h100_idle"],
  ["a100-a", "hgx_a100_40g"],
  ["l40s-a", "l40s_4x"],
];

/** The control plane's port when `--port` is not given. */
export const DEV_DEFAULT_PORT = 7070;

/**
 * Every port `llmgw dev --port P` uses is in P … P+DEV_PORT_SPAN-1, so two
 * clusters whose `--port` values are at least this far apart share none.
 */
export const DEV_PORT_SPAN = 1000;

/** The lowest `--port`: lower ports need privileges, and agents' ranges start at 1024. */
export const DEV_PORT_MIN = 1024;

/** The highest `--port`: the last port of the span is then 65535. */
export const DEV_PORT_MAX = 65535 - DEV_PORT_SPAN + 1;

/** The gateway's offset from P (7080 beside the default control plane's 7070). */
const GATEWAY_OFFSET = 10;
/** Agent i's local API listens on P + AGENT_API_OFFSET + i. */
const AGENT_API_OFFSET = 20;
/** Agent i's engine proxy, the one door to its engines, listens on P + AGENT_PROXY_OFFSET + i. */
const AGENT_PROXY_OFFSET = 30;
/** The fake hub listens on P + HUB_OFFSET, its CDN on the port after (when dev starts one). */
const HUB_OFFSET = 40;
/** Agent i's engines get ports P + ENGINE_OFFSET + ENGINE_RANGE_SIZE × i onwards. */
const ENGINE_OFFSET = 200;
/** Ports per simulated agent: 20 shards' blocks (engines/port_block.ts). */
const ENGINE_RANGE_SIZE = 20 * PORT_BLOCK;

/** The ports of one simulated agent. */
export interface DevAgentPorts {
  /** The node id. */
  node: string;
  /** Its local API. */
  api: number;
  /** Its engine proxy, through which the gateway reaches its engines. */
  proxy: number;
  /** The range its engines' ports come from. */
  engines: PortRange;
}

/** Every port a `llmgw dev --port P` cluster uses. */
export interface DevPorts {
  /** The control plane's API: P. */
  control: number;
  /** The gateway: P+10. */
  gateway: number;
  /** One entry per node of {@link DEV_NODES}, in order. */
  agents: DevAgentPorts[];
  /** The fake hub (dev/fake_hub), started when `HF_ENDPOINT` is not set: P+40. */
  hub: number;
  /** The fake hub's CDN, where it redirects large files: P+41. */
  hubCdn: number;
}

/**
 * The port layout of `llmgw dev --port base` (`base` from
 * {@link DEV_PORT_MIN} to {@link DEV_PORT_MAX}): control `base`, gateway
 * `base+10`, agent i's local API `base+20+i` and engine proxy `base+30+i`,
 * the fake hub `base+40` and its CDN `base+41`, agent i's engines `base+200+200i` … `base+399+200i`. All of them lie in
 * `base` … `base+999` and no two overlap.
 */
export function devPorts(base: number): DevPorts {
  return {
    control: base,
    gateway: base + GATEWAY_OFFSET,
    agents: DEV_NODES.map(([node], i) => {
      const from = base + ENGINE_OFFSET + ENGINE_RANGE_SIZE * i;
      return {
        node,
        api: base + AGENT_API_OFFSET + i,
        proxy: base + AGENT_PROXY_OFFSET + i,
        engines: { from, to: from + ENGINE_RANGE_SIZE - 1 },
      };
    }),
    hub: base + HUB_OFFSET,
    hubCdn: base + HUB_OFFSET + 1,
  };
}

/** The layout as the usage text shows it: [offset from P, what listens there]. */
export function layoutRows(): [string, string][] {
  const n = DEV_NODES.length;
  const span = (from: number, count: number) => `P+${from}…P+${from + count - 1}`;
  return [
    ["P", "the control plane's API"],
    [`P+${GATEWAY_OFFSET}`, "the gateway"],
    [span(AGENT_API_OFFSET, n), "the agents' local APIs"],
    [span(AGENT_PROXY_OFFSET, n), "the agents' engine proxies"],
    [span(HUB_OFFSET, 2), "the fake hub and its CDN (without HF_ENDPOINT)"],
    [
      span(ENGINE_OFFSET, ENGINE_RANGE_SIZE * n),
      `the engines, ${ENGINE_RANGE_SIZE} ports per agent`,
    ],
  ];
}

/**
 * Parses `--port`: a whole number whose whole span of ports exists.
 *
 * @throws {UsageError} Naming the value otherwise.
 */
export function parseDevPort(value: string): number {
  const port = /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(port >= DEV_PORT_MIN && port <= DEV_PORT_MAX)) {
    throw new UsageError(
      `dev: --port must be a whole number from ${DEV_PORT_MIN} to ${DEV_PORT_MAX} ` +
        `(dev uses ports P to P+${DEV_PORT_SPAN - 1}), got "${value}"`,
    );
  }
  return port;
}
