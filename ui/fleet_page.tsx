/**
 * The fleet page (/ui/): counts by node state, GPU class and fabric on top
 * (each a filter), then the matching nodes grouped, 50 a page, each with its
 * GPUs as a strip of cells (free, held, unhealthy; the title says class,
 * memory, holder and problems) and cordon, uncordon and drain buttons (only
 * admin tokens reach the dashboard).
 * The node list is a fragment that refreshes itself every 2 s.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import {
  type Count,
  type FleetModel,
  type FleetQuery,
  fleetQueryString,
  type GpuCell,
  GROUP_BYS,
  mainClass,
  type NodeRow,
} from "./fleet_model.ts";
import { ago, gib, Layout, type SessionView, StateBadge } from "./layout.tsx";
import { NODE_STATES } from "../inventory/types.ts";
import type { NodeCache } from "./node_cache.ts";
import { formatBytes } from "../text/bytes.ts";

/** How often the node list refreshes, in seconds. */
const REFRESH_S = 2;

/** A GPU cell's tooltip; its class only when it is not the row's (the row says that). */
function gpuTitle(g: GpuCell, rowClass: string): string {
  const parts = [
    `GPU ${g.index}`,
    ...((g.class ?? "unknown class") === rowClass ? [] : [g.class ?? "unknown class"]),
    `${gib(g.memory.used)}/${gib(g.memory.total)} GiB`,
    g.replica === null ? "free" : `held by ${g.replica}`,
    ...g.problems,
  ];
  return parts.join(" · ");
}

function GpuStrip(props: { gpus: GpuCell[]; rowClass: string }) {
  return (
    <div class="gpus">
      {props.gpus.map((g) => (
        <i
          key={g.index}
          class={`g ${g.status}`}
          title={gpuTitle(g, props.rowClass)}
        >
          {g.index}
        </i>
      ))}
    </div>
  );
}

/** `node` or `nodes`, as `n` needs. */
function plural(n: number, word: string): string {
  return n === 1 ? word : `${word}s`;
}

function percent(part: number, whole: number): number {
  return whole === 0 ? 0 : Math.round((part / whole) * 100);
}

function Bar(props: { part: number; whole: number }) {
  return (
    <div class="bar" title={`${props.part} of ${props.whole}`}>
      <i style={`width:${percent(props.part, props.whole)}%`}></i>
    </div>
  );
}

/** A link to the fleet page with one filter changed (page back to 1). */
function filterHref(q: FleetQuery, change: Partial<FleetQuery>): string {
  return `/ui/${fleetQueryString({ ...q, ...change, page: 1 })}`;
}

function Chip(props: { href: string; on: boolean; children?: Child }) {
  return (
    <a class={props.on ? "chip on" : "chip"} href={props.href}>
      {props.children}
    </a>
  );
}

function Summary(props: { model: FleetModel; query: FleetQuery }) {
  const { model: m, query: q } = props;
  return (
    <div class="cards">
      <div class="card">
        <h3>Nodes</h3>
        <div class="big">{m.total.nodes}</div>
        <div class="chips">
          {m.byState.map((s: Count) => (
            <Chip
              href={filterHref(q, {
                state: q.state === s.name ? null : s.name as never,
              })}
              on={q.state === s.name}
            >
              <span class={`badge s-${s.name}`}>{s.name}</span>
              <b>{s.nodes}</b>
            </Chip>
          ))}
        </div>
      </div>
      <div class="card">
        <h3>GPUs by class</h3>
        <div class="big">
          {m.total.gpus}{" "}
          <span class="mute small">
            {m.total.held} held · {m.total.unhealthy} unhealthy
          </span>
        </div>
        <Bar part={m.total.held} whole={m.total.gpus} />
        <div class="chips" style="margin-top:8px">
          {m.byClass.map((c) => (
            <Chip
              href={filterHref(q, {
                gpuClass: q.gpuClass === c.name ? null : c.name,
              })}
              on={q.gpuClass === c.name}
            >
              {c.name} <b>{c.held}/{c.gpus}</b>
              {c.unhealthy > 0 ? <span class="problem">{c.unhealthy} unhealthy</span> : null}
            </Chip>
          ))}
        </div>
      </div>
      <div class="card">
        <h3>Fabrics</h3>
        <div class="big">{m.byFabric.length}</div>
        <div class="chips">
          {m.byFabric.map((f) => (
            <Chip
              href={filterHref(q, {
                fabric: q.fabric === f.name ? null : f.name,
              })}
              on={q.fabric === f.name}
            >
              {f.name} <b>{f.nodes}</b> {plural(f.nodes, "node")}
              <span class="mute">
                {rateText(f.min_rate_gbps, f.max_rate_gbps)}
              </span>
            </Chip>
          ))}
          {m.byFabric.length === 0 ? <span class="mute">none reported</span> : null}
        </div>
      </div>
    </div>
  );
}

function rateText(min: number | null, max: number | null): string {
  if (min === null || max === null) return "rate unknown";
  return min === max ? `${min} Gb/s` : `${min}–${max} Gb/s`;
}

function Filters(props: { query: FleetQuery; model: FleetModel }) {
  const q = props.query;
  return (
    <form
      id="filters"
      class="filters"
      method="get"
      action="/ui/"
      hx-get="/ui/fragments/fleet"
      hx-target="#fleet"
      hx-swap="outerHTML"
      hx-trigger="change, input delay:300ms"
    >
      <input
        type="search"
        name="q"
        value={q.q}
        placeholder="node, host or label=value"
        aria-label="Search nodes"
      />
      <select name="state" aria-label="State">
        <option value="">any state</option>
        {NODE_STATES.map((s) => <option key={s} value={s} selected={q.state === s}>{s}</option>)}
      </select>
      <select name="class" aria-label="GPU class">
        <option value="">any GPU class</option>
        {props.model.byClass.map((c) => (
          <option value={c.name} selected={q.gpuClass === c.name}>
            {c.name}
          </option>
        ))}
      </select>
      <select name="fabric" aria-label="Fabric">
        <option value="">any fabric</option>
        {props.model.byFabric.map((f) => (
          <option value={f.name} selected={q.fabric === f.name}>
            {f.name}
          </option>
        ))}
      </select>
      <label class="small">
        <input type="checkbox" name="problems" value="1" checked={q.problems} /> unhealthy GPUs only
      </label>
      <label class="small">
        group by{" "}
        <select name="group" aria-label="Group by">
          {GROUP_BYS.map((g) => (
            <option value={g} selected={q.group === g}>
              {g === "class" ? "GPU class" : g}
            </option>
          ))}
        </select>
      </label>
      <noscript>
        <button type="submit">Apply</button>
      </noscript>
    </form>
  );
}

function Actions(props: { row: NodeRow }) {
  const id = encodeURIComponent(props.row.id);
  const s = props.row.state;
  return (
    <div class="nowrap">
      {s === "cordoned" || s === "draining"
        ? (
          <button type="button" hx-post={`/ui/nodes/${id}/uncordon`}>
            Uncordon
          </button>
        )
        : (
          <button type="button" hx-post={`/ui/nodes/${id}/cordon`}>
            Cordon
          </button>
        )} {s === "draining" ? null : (
        <button
          type="button"
          class="danger"
          hx-post={`/ui/nodes/${id}/drain`}
          hx-confirm={`Drain ${props.row.id}? Its replicas move off.`}
        >
          Drain
        </button>
      )}
    </div>
  );
}

/** A node's model cache: its room, then its first revisions with their state. */
function CacheTd(props: { cache: NodeCache | null }) {
  const c = props.cache;
  if (c === null) return <td class="small mute">no cache reported</td>;
  return (
    <td class="small" data-cache="">
      <div class="nowrap">
        {c.complete} held ·{" "}
        {c.room_bytes === null ? "room unknown" : `${formatBytes(c.room_bytes)} room`}
      </div>
      {c.revisions.map((r) => (
        <div
          key={r.name}
          class="nowrap"
          title={`${formatBytes(r.bytes)}${r.pinned ? " · pinned" : ""}`}
        >
          <span class="mute">{r.name}</span> {r.state === "complete"
            ? formatBytes(r.bytes)
            : `${r.state}${r.percent === null ? "" : ` ${r.percent}%`}`}
          {r.pinned ? " · pinned" : null}
        </div>
      ))}
      {c.more > 0 ? <div class="mute">and {c.more} more</div> : null}
    </td>
  );
}

function NodeTr(props: { row: NodeRow; now: number }) {
  const r = props.row;
  const used = r.gpus.reduce((a, g) => a + (g.memory.used ?? 0), 0);
  const total = r.gpus.reduce((a, g) => a + (g.memory.total ?? 0), 0);
  const problems = [
    ...new Set(
      r.gpus.flatMap((g) => g.problems.map((p) => `GPU ${g.index}: ${p}`)),
    ),
  ];
  return (
    <tr data-node={r.id}>
      <td>
        <b>{r.id}</b>
        {r.hostname !== r.id ? <div class="mute small">{r.hostname}</div> : null}
      </td>
      <td>
        <StateBadge state={r.state} />
      </td>
      <td>
        <div class="small">{r.hardware}</div>
        <GpuStrip gpus={r.gpus} rowClass={mainClass(r)} />
        {problems.slice(0, 3).map((p) => <div key={p} class="problem">{p}</div>)}
        {problems.length > 3 ? <div class="problem">and {problems.length - 3} more</div> : null}
      </td>
      <td class="small nowrap">
        {r.held}/{r.gpus.length} held
        <div class="mute">{gib(used)}/{gib(total)} GiB</div>
      </td>
      <CacheTd cache={r.cache} />
      <td class="small">
        {r.fabrics.length === 0
          ? <span class="mute">none</span>
          : r.fabrics.map((f) => (
            <div class="nowrap">
              {f.name}{" "}
              <span class="mute">
                {f.rate_gbps === null ? "?" : `${f.rate_gbps} Gb/s`}
              </span>
            </div>
          ))}
      </td>
      <td class="small mute nowrap">{ago(r.last_seen_ms, props.now)}</td>
      <td>
        <Actions row={r} />
      </td>
    </tr>
  );
}

/** The node list: groups, rows and pager; it refreshes itself with its own query. */
export function FleetFragment(
  props: { model: FleetModel; query: FleetQuery; now: number },
) {
  const { model: m, query: q } = props;
  const self = `/ui/fragments/fleet${fleetQueryString(q, m.page)}`;
  const cols = 8;
  const pageLink = (page: number, label: string) => (
    <a
      href={`/ui/${fleetQueryString(q, page)}`}
      hx-get={`/ui/fragments/fleet${fleetQueryString(q, page)}`}
      hx-target="#fleet"
      hx-swap="outerHTML"
    >
      {label}
    </a>
  );
  return (
    <div
      id="fleet"
      class="panel"
      hx-get={self}
      hx-trigger={`every ${REFRESH_S}s, fleet-changed from:body`}
      hx-swap="outerHTML"
    >
      <div class="mute small" style="margin-bottom:8px">
        {m.matched} of {m.total.nodes} nodes match · grouped by{" "}
        {q.group === "class" ? "GPU class" : q.group}
        {m.pages > 1 ? ` · page ${m.page} of ${m.pages}` : ""}
      </div>
      <table>
        <thead>
          <tr>
            <th>Node</th>
            <th>State</th>
            <th>GPUs</th>
            <th>Use</th>
            <th>Model cache</th>
            <th>Fabrics</th>
            <th>Seen</th>
            <th></th>
          </tr>
        </thead>
        <tbody hx-swap="none">
          {m.groups.filter((g) => g.rows.length > 0).map((g) => (
            <>
              <tr class="group">
                <td colspan={cols}>
                  {g.name}{" "}
                  <span class="mute small">
                    · {g.nodes} {plural(g.nodes, "node")} · {g.gpus} GPUs · {g.held} held
                    {g.unhealthy > 0 ? ` · ${g.unhealthy} unhealthy` : ""}
                  </span>
                </td>
              </tr>
              {g.rows.map((r) => <NodeTr key={r.id} row={r} now={props.now} />)}
            </>
          ))}
          {m.matched === 0
            ? (
              <tr>
                <td colspan={cols} class="mute">No node matches.</td>
              </tr>
            )
            : null}
        </tbody>
      </table>
      {m.pages > 1
        ? (
          <div class="pager">
            {m.page > 1 ? pageLink(m.page - 1, "← previous") : null}
            <span class="mute small">page {m.page} of {m.pages}</span>
            {m.page < m.pages ? pageLink(m.page + 1, "next →") : null}
          </div>
        )
        : null}
    </div>
  );
}

/** The fleet page. */
export function FleetPage(props: {
  model: FleetModel;
  query: FleetQuery;
  now: number;
  session: SessionView;
}) {
  return (
    <Layout title="Fleet" page="fleet" session={props.session}>
      <h1>Fleet</h1>
      <Summary model={props.model} query={props.query} />
      <Filters query={props.query} model={props.model} />
      <FleetFragment model={props.model} query={props.query} now={props.now} />
    </Layout>
  );
}
