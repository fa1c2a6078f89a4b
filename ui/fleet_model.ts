/**
 * The fleet page's model (docs/ui.md), pure: the inventory's nodes filtered,
 * counted, grouped and paged, so a 1,000-node fleet reads at a glance — the
 * counts by state, GPU class and fabric on top, one row per node, its GPUs as
 * a strip of small cells, and 50 rows a page.
 *
 * @module
 */
import type { InventoryNode } from "../inventory/store.ts";
import { NODE_STATES, type NodeState } from "../inventory/types.ts";
import { compareNatural } from "../text/natural_order.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import { type NodeCache, nodeCache } from "./node_cache.ts";

/** Rows a page. */
export const FLEET_PAGE_SIZE = 50;

/** What rows are grouped by. */
export type GroupBy = "class" | "state" | "fabric";

/** The groupings, in the order the page offers them. */
export const GROUP_BYS: readonly GroupBy[] = ["class", "state", "fabric"];

/** The fleet page's filters, from its query string. */
export interface FleetQuery {
  /** Text a node's id, host name or a label must contain; empty: any. */
  q: string;
  /** Only nodes in this state; null: any. */
  state: NodeState | null;
  /** Only nodes with a GPU of this class; null: any. */
  gpuClass: string | null;
  /** Only nodes attached to this fabric; null: any. */
  fabric: string | null;
  /** Only nodes with an unhealthy GPU. */
  problems: boolean;
  /** How rows are grouped. */
  group: GroupBy;
  /** The page, from 1. */
  page: number;
}

/** A fleet query refused, naming the parameter. */
export class FleetQueryError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "FleetQueryError";
  }
}

/** The longest text filter. */
const MAX_FILTER_CHARS = 200;

/** Parses the fleet page's query; empty values mean "any". */
export function parseFleetQuery(
  raw: Record<string, string | undefined>,
): FleetQuery {
  const text = (name: string): string | null => {
    const v = (raw[name] ?? "").trim();
    if (v.length > MAX_FILTER_CHARS) {
      throw new FleetQueryError(
        `Cannot filter the fleet: ${name} is longer than ${MAX_FILTER_CHARS} characters`,
      );
    }
    return v === "" ? null : v;
  };
  const state = text("state");
  if (state !== null && !(NODE_STATES as readonly string[]).includes(state)) {
    throw new FleetQueryError(
      `Cannot filter the fleet: state "${state}" is not one of ${NODE_STATES.join(", ")}`,
    );
  }
  const group = text("group") ?? "class";
  if (!(GROUP_BYS as readonly string[]).includes(group)) {
    throw new FleetQueryError(
      `Cannot group the fleet: group "${group}" is not one of ${GROUP_BYS.join(", ")}`,
    );
  }
  const pageText = text("page") ?? "1";
  if (!/^[1-9][0-9]{0,5}$/.test(pageText)) {
    throw new FleetQueryError(
      `Cannot page the fleet: page "${pageText}" is not a whole number ≥ 1`,
    );
  }
  const problems = text("problems");
  if (problems !== null && problems !== "1") {
    throw new FleetQueryError(
      `Cannot filter the fleet: problems must be 1 or empty, not "${problems}"`,
    );
  }
  return {
    q: text("q") ?? "",
    state: state as NodeState | null,
    gpuClass: text("class"),
    fabric: text("fabric"),
    problems: problems === "1",
    group: group as GroupBy,
    page: Number(pageText),
  };
}

/** The query string of a fleet query, defaults left out; `page` overrides its page. */
export function fleetQueryString(q: FleetQuery, page = q.page): string {
  const p = new URLSearchParams();
  if (q.q !== "") p.set("q", q.q);
  if (q.state !== null) p.set("state", q.state);
  if (q.gpuClass !== null) p.set("class", q.gpuClass);
  if (q.fabric !== null) p.set("fabric", q.fabric);
  if (q.problems) p.set("problems", "1");
  if (q.group !== "class") p.set("group", q.group);
  if (page !== 1) p.set("page", String(page));
  const s = p.toString();
  return s === "" ? "" : `?${s}`;
}

/** One GPU as a cell of its node's strip. */
export interface GpuCell {
  /** nvidia-smi index. */
  index: number;
  /** Placement class, or null when unknown. */
  class: string | null;
  /** `free`, `held` by a shard, or `unhealthy` (health problems; it may be held too). */
  status: "free" | "held" | "unhealthy";
  /** Memory used and total in MiB, when known. */
  memory: { used: number | null; total: number | null };
  /** The replica holding it, or null. */
  replica: string | null;
  /** Its health problems. */
  problems: string[];
}

/** A node's row. */
export interface NodeRow {
  /** Node id. */
  id: string;
  /** Host name. */
  hostname: string;
  /** Its state. */
  state: NodeState;
  /** Its GPUs, by index. */
  gpus: GpuCell[];
  /** What its GPUs are, e.g. `8 × h100-80g`. */
  hardware: string;
  /** Its fabric attachments with their rates. */
  fabrics: { name: string; rate_gbps: number | null }[];
  /** GPUs held by shards. */
  held: number;
  /** GPUs with health problems. */
  unhealthy: number;
  /** When it was last heard from, ms since the epoch. */
  last_seen_ms: number;
  /** Its agent's model cache; null when it reports none (an older agent, none configured). */
  cache: NodeCache | null;
}

/** A count under a name, e.g. 812 nodes ready. */
export interface Count {
  /** The name. */
  name: string;
  /** Nodes. */
  nodes: number;
  /** GPUs on them. */
  gpus: number;
  /** Of which held. */
  held: number;
  /** Of which unhealthy. */
  unhealthy: number;
}

/** A fabric with its attached nodes and their rates. */
export interface FabricCount extends Count {
  /** The slowest attachment's rate in Gb/s; null when none is known. */
  min_rate_gbps: number | null;
  /** The fastest. */
  max_rate_gbps: number | null;
}

/** A group of the rows that match: its key and counts, and the rows on this page. */
export interface Group extends Count {
  /** Rows of this group on the page shown. */
  rows: NodeRow[];
}

/** The fleet page. */
export interface FleetModel {
  /** The whole fleet. */
  total: Count;
  /** Every state (zero counts included), in design order. */
  byState: Count[];
  /** GPU classes, by GPU count, largest first. */
  byClass: Count[];
  /** Fabrics by name. */
  byFabric: FabricCount[];
  /** Nodes the filters match. */
  matched: number;
  /** Groups of the matching nodes with the rows of this page; every group is listed. */
  groups: Group[];
  /** The page shown (clamped to the last). */
  page: number;
  /** Pages. */
  pages: number;
}

const NO_CLASS = "unknown class";
const NO_GPU = "no GPUs";
const NO_FABRIC = "no fabric";

/** A node as a row, with its agent's last model cache report when there is one. */
export function nodeRow(n: InventoryNode, cache?: ModelCacheReport): NodeRow {
  const holder = new Map<number, string>();
  for (const a of n.allocations) {
    for (const i of a.gpu_indices) holder.set(i, a.replica_id);
  }
  const gpus: GpuCell[] = [...n.gpus].sort((a, b) => a.index - b.index).map((
    g,
  ) => ({
    index: g.index,
    class: g.class,
    status: g.health.problems.length > 0 ? "unhealthy" : holder.has(g.index) ? "held" : "free",
    memory: { used: g.memory_used_mb, total: g.memory_total_mb },
    replica: holder.get(g.index) ?? null,
    problems: g.health.problems,
  }));
  const classes = new Map<string, number>();
  for (const g of gpus) {
    classes.set(
      g.class ?? NO_CLASS,
      (classes.get(g.class ?? NO_CLASS) ?? 0) + 1,
    );
  }
  const hardware = gpus.length === 0
    ? NO_GPU
    : [...classes].sort((a, b) => b[1] - a[1]).map(([c, k]) => `${k} × ${c}`)
      .join(", ");
  return {
    id: n.id,
    hostname: n.hostname,
    state: n.state,
    gpus,
    hardware,
    fabrics: n.fabrics.map((f) => ({ name: f.fabric, rate_gbps: f.rate_gbps }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    held: gpus.filter((g) => g.replica !== null).length,
    unhealthy: gpus.filter((g) => g.status === "unhealthy").length,
    last_seen_ms: n.last_seen_ms,
    cache: nodeCache(cache),
  };
}

/** A row's main GPU class: the class most of its GPUs have. */
export function mainClass(row: NodeRow): string {
  if (row.gpus.length === 0) return NO_GPU;
  const counts = new Map<string, number>();
  for (const g of row.gpus) {
    counts.set(g.class ?? NO_CLASS, (counts.get(g.class ?? NO_CLASS) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0][0];
}

/** The key of a row's group. */
export function groupKey(row: NodeRow, by: GroupBy): string {
  if (by === "state") return row.state;
  if (by === "class") return mainClass(row);
  return row.fabrics.length === 0 ? NO_FABRIC : row.fabrics.map((f) => f.name).join(" + ");
}

/** Whether a row passes the filters. */
export function matchesQuery(
  row: NodeRow,
  labels: Record<string, string>,
  q: FleetQuery,
): boolean {
  if (q.state !== null && row.state !== q.state) return false;
  if (
    q.gpuClass !== null &&
    !row.gpus.some((g) => (g.class ?? NO_CLASS) === q.gpuClass)
  ) {
    return false;
  }
  if (q.fabric !== null && !row.fabrics.some((f) => f.name === q.fabric)) {
    return false;
  }
  if (q.problems && row.unhealthy === 0) return false;
  if (q.q !== "") {
    const needle = q.q.toLowerCase();
    const hay = [
      row.id,
      row.hostname,
      ...Object.entries(labels).map(([k, v]) => `${k}=${v}`),
    ];
    if (!hay.some((h) => h.toLowerCase().includes(needle))) return false;
  }
  return true;
}

function add(
  counts: Map<string, Count>,
  name: string,
  row: NodeRow,
  gpus = row.gpus,
): void {
  const c = counts.get(name) ??
    { name, nodes: 0, gpus: 0, held: 0, unhealthy: 0 };
  c.nodes++;
  c.gpus += gpus.length;
  c.held += gpus.filter((g) => g.replica !== null).length;
  c.unhealthy += gpus.filter((g) => g.status === "unhealthy").length;
  counts.set(name, c);
}

/** The fleet page's model from the inventory's nodes and their agents' model cache reports. */
export function fleetModel(
  nodes: readonly InventoryNode[],
  q: FleetQuery,
  caches: ReadonlyMap<string, ModelCacheReport> = new Map(),
): FleetModel {
  const rows = nodes.map((n) => ({ row: nodeRow(n, caches.get(n.id)), labels: n.labels }));
  const total: Count = {
    name: "fleet",
    nodes: 0,
    gpus: 0,
    held: 0,
    unhealthy: 0,
  };
  const states = new Map<string, Count>(
    NODE_STATES.map((
      s,
    ) => [s, { name: s, nodes: 0, gpus: 0, held: 0, unhealthy: 0 }]),
  );
  const classes = new Map<string, Count>();
  const fabrics = new Map<string, FabricCount>();
  for (const { row } of rows) {
    total.nodes++;
    total.gpus += row.gpus.length;
    total.held += row.held;
    total.unhealthy += row.unhealthy;
    add(states, row.state, row);
    const byClass = new Map<string, GpuCell[]>();
    for (const g of row.gpus) {
      const k = g.class ?? NO_CLASS;
      byClass.set(k, [...byClass.get(k) ?? [], g]);
    }
    for (const [k, gpus] of byClass) add(classes, k, row, gpus);
    for (const f of row.fabrics) {
      const c = fabrics.get(f.name) ??
        {
          name: f.name,
          nodes: 0,
          gpus: 0,
          held: 0,
          unhealthy: 0,
          min_rate_gbps: null,
          max_rate_gbps: null,
        };
      fabrics.set(f.name, c);
      add(fabrics as Map<string, Count>, f.name, row);
      if (f.rate_gbps !== null) {
        c.min_rate_gbps = Math.min(c.min_rate_gbps ?? Infinity, f.rate_gbps);
        c.max_rate_gbps = Math.max(c.max_rate_gbps ?? -Infinity, f.rate_gbps);
      }
    }
  }
  const matching = rows.filter(({ row, labels }) => matchesQuery(row, labels, q))
    .map(({ row }) => ({ row, key: groupKey(row, q.group) }));
  const groupOrder = (k: string) => q.group === "state" ? NODE_STATES.indexOf(k as NodeState) : 0;
  matching.sort((a, b) =>
    groupOrder(a.key) - groupOrder(b.key) || compareNatural(a.key, b.key) ||
    compareNatural(a.row.id, b.row.id)
  );
  const pages = Math.max(1, Math.ceil(matching.length / FLEET_PAGE_SIZE));
  const page = Math.min(q.page, pages);
  const shown = new Set(
    matching.slice((page - 1) * FLEET_PAGE_SIZE, page * FLEET_PAGE_SIZE).map((
      m,
    ) => m.row.id),
  );
  const groups = new Map<string, Group>();
  for (const { row, key } of matching) {
    const g = groups.get(key) ??
      { name: key, nodes: 0, gpus: 0, held: 0, unhealthy: 0, rows: [] };
    g.nodes++;
    g.gpus += row.gpus.length;
    g.held += row.held;
    g.unhealthy += row.unhealthy;
    if (shown.has(row.id)) g.rows.push(row);
    groups.set(key, g);
  }
  return {
    total,
    byState: [...states.values()],
    byClass: [...classes.values()].sort((a, b) => b.gpus - a.gpus || a.name.localeCompare(b.name)),
    byFabric: [...fabrics.values()].sort((a, b) => a.name.localeCompare(b.name)),
    matched: matching.length,
    groups: [...groups.values()],
    page,
    pages,
  };
}
