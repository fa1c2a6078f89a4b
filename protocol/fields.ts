/**
 * Field schemas more than one contract carries: what a registration
 * accepts must also pass in the launches built from it, so both use these.
 *
 * @module
 */
import { z } from "zod";

/** A node id: letters, digits, '.', '_' or '-', 1-128 characters. */
export const NodeIdSchema = z.string().regex(
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
  "must be a node id of letters, digits, '.', '_' or '-'",
);

/** A GPU's CUDA compute capability, `MAJOR.MINOR`. */
export const ComputeCapabilitySchema = z.string().max(16).regex(
  /^\d+\.\d+$/,
  "must be MAJOR.MINOR, e.g. 9.0",
);

/** A TCP port a process listens on or connects to. */
export const PortSchema = z.number().int().min(1).max(65535);

/** The most characters of a management address (an IPv6 address with a zone fits). */
export const MAX_MGMT_ADDR_CHARS = 64;

/** The largest certificate request accepted, in characters of PEM (tls/csr.ts checks it too). */
export const MAX_CSR_CHARS = 8192;

/** The most characters of a network interface name (Linux IFNAMSIZ − 1). */
export const MAX_INTERFACE_CHARS = 15;

/** One active RDMA port of a fabric attachment (discovery/types.ts `FabricPort`). */
export const FabricPortSchema = z.object({
  hca: z.string().min(1).max(64),
  port: z.number().int().min(1).max(255),
  link_layer: z.enum(["infiniband", "roce"]).nullable(),
  rate_gbps: z.number().min(0).max(1_000_000).nullable(),
  roce_v2_gid_index: z.number().int().min(0).max(65535).nullable(),
});
