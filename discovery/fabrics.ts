/**
 * Operator-named fabrics (design §5.2): which HCAs of this node belong to which
 * fabric is configuration, never derived (equal GID prefixes prove nothing:
 * OpenSM's default subnet prefix is fe80:: everywhere).
 *
 * @module
 */
import { compareNatural } from "../text/natural_order.ts";
import type { FabricAttachment, FabricPort, Hca } from "./types.ts";

/** The operator's assignment: fabric name → adapters (`mlx5_0`, or `mlx5_0:1` for one port). */
export type FabricConfig = Record<string, string[]>;

/** Raised for a fabric assignment that cannot mean anything. */
export class FabricConfigError extends Error {
  /** Creates the error; `message` names the offending value. */
  constructor(message: string) {
    super(message);
    this.name = "FabricConfigError";
  }
}

const FABRIC_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const HCA_REF = /^([A-Za-z0-9][A-Za-z0-9_.-]*)(?::(\d+))?$/;

/**
 * Parses one `--fabric NAME=HCA[,HCA…]` value.
 *
 * @throws {FabricConfigError} When the name or an adapter is malformed.
 */
export function parseFabricFlag(value: string): [name: string, hcas: string[]] {
  const eq = value.indexOf("=");
  if (eq === -1) {
    throw new FabricConfigError(
      `Cannot parse --fabric "${value}": expected NAME=HCA[,HCA…], e.g. ib0=mlx5_0,mlx5_1`,
    );
  }
  const name = value.slice(0, eq).trim();
  const hcas = value.slice(eq + 1).split(",").map((h) => h.trim()).filter((h) => h !== "");
  validateFabric(name, hcas, `--fabric "${value}"`);
  return [name, hcas];
}

/**
 * Checks a whole fabric configuration: valid names, valid adapter references,
 * and no port in two fabrics (one cable reaches one fabric). Two ports of one
 * dual-port adapter may belong to different fabrics when named as `hca:port`.
 *
 * @throws {FabricConfigError} On the first mistake, naming where it is.
 */
export function validateFabricConfig(config: FabricConfig, where = "fabrics"): void {
  // Owner of a whole adapter ("mlx5_0") or of one port ("mlx5_0:1").
  const owner = new Map<string, string>();
  const conflict = (ref: string, other: string, name: string) =>
    new FabricConfigError(
      `Cannot use ${where}: ${ref} is assigned to both fabric ${other} and fabric ${name}`,
    );
  for (const [name, hcas] of Object.entries(config)) {
    validateFabric(name, hcas, `${where}.${name}`);
    for (const ref of hcas) {
      const [hca, port] = ref.split(":");
      const whole = owner.get(hca);
      if (whole !== undefined && whole !== name) throw conflict(`adapter ${hca}`, whole, name);
      if (port === undefined) {
        for (const [key, other] of owner) {
          if (key.startsWith(`${hca}:`) && other !== name) {
            throw conflict(`adapter ${hca}`, other, name);
          }
        }
        owner.set(hca, name);
      } else {
        const other = owner.get(ref);
        if (other !== undefined && other !== name) throw conflict(`port ${ref}`, other, name);
        owner.set(ref, name);
      }
    }
  }
}

function validateFabric(name: string, hcas: string[], where: string): void {
  if (!FABRIC_NAME.test(name)) {
    throw new FabricConfigError(
      `Cannot parse ${where}: fabric name "${name}" must be 1-63 letters, digits, '.', '_' or '-'`,
    );
  }
  if (hcas.length === 0) {
    throw new FabricConfigError(`Cannot parse ${where}: fabric ${name} lists no adapters`);
  }
  for (const h of hcas) {
    if (!HCA_REF.test(h)) {
      throw new FabricConfigError(
        `Cannot parse ${where}: "${h}" is not an adapter name like mlx5_0 or mlx5_0:1`,
      );
    }
  }
}

/**
 * Builds this node's fabric attachments from the discovered adapters and the
 * operator's assignment. Only active ports are used; an adapter that is
 * missing or has no active port is a warning and is left out. A fabric with no
 * usable port is not attached. No fabric at all is a single-node island.
 */
export function attachFabrics(
  /** The RDMA adapters, sorted naturally by name. */
  hcas: Hca[],
  config: FabricConfig,
): { fabrics: FabricAttachment[]; warnings: string[] } {
  const byName = new Map(hcas.map((h) => [h.name, h]));
  const fabrics: FabricAttachment[] = [];
  const warnings: string[] = [];
  for (const fabric of Object.keys(config).sort(compareNatural)) {
    const ports: FabricPort[] = [];
    const taken = new Set<string>();
    for (const ref of config[fabric]) {
      const [hcaName, portText] = ref.split(":");
      const hca = byName.get(hcaName);
      if (hca === undefined) {
        warnings.push(`fabric ${fabric}: adapter ${hcaName} does not exist on this node`);
        continue;
      }
      const wanted = portText === undefined
        ? hca.ports
        : hca.ports.filter((p) => p.port === Number(portText));
      if (wanted.length === 0) {
        warnings.push(
          portText === undefined
            ? `fabric ${fabric}: adapter ${hcaName} has no ports`
            : `fabric ${fabric}: adapter ${hcaName} has no port ${portText}`,
        );
        continue;
      }
      for (const p of wanted) {
        // "mlx5_0" and "mlx5_0:1" in one list name the same port once.
        if (taken.has(`${hcaName}:${p.port}`)) continue;
        taken.add(`${hcaName}:${p.port}`);
        if (!p.active) {
          warnings.push(
            `fabric ${fabric}: ${hcaName} port ${p.port} is down (${p.state ?? "unknown state"}, ${
              p.physical_state ?? "unknown physical state"
            }); not used`,
          );
          continue;
        }
        if (p.link_layer === "roce" && p.roce_v2_gid_index === null) {
          warnings.push(
            `fabric ${fabric}: RoCE port ${hcaName}:${p.port} has no RoCE v2 GID; NCCL_IB_GID_INDEX cannot be set for it`,
          );
        }
        ports.push({
          hca: hcaName,
          port: p.port,
          link_layer: p.link_layer,
          rate_gbps: p.rate_gbps,
          roce_v2_gid_index: p.roce_v2_gid_index,
        });
      }
    }
    if (ports.length === 0) {
      warnings.push(`fabric ${fabric}: no active port on this node; not attached`);
      continue;
    }
    ports.sort((a, b) => compareNatural(a.hca, b.hca) || a.port - b.port);
    const layers = new Set(ports.map((p) => p.link_layer));
    if (layers.has("infiniband") && layers.has("roce")) {
      warnings.push(
        `fabric ${fabric}: mixes InfiniBand and RoCE ports, which cannot reach each other`,
      );
    }
    if (layers.has(null)) {
      warnings.push(`fabric ${fabric}: the link layer of some ports is unknown`);
    }
    const rates = ports.map((p) => p.rate_gbps);
    fabrics.push({
      fabric,
      hcas: [...new Set(ports.map((p) => p.hca))],
      ports,
      rate_gbps: rates.some((r) => r === null) ? null : Math.min(...(rates as number[])),
    });
  }
  return { fabrics, warnings };
}
