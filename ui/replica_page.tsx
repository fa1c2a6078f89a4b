/**
 * The replica page (/ui/replicas/ID): its state and placement (each shard's
 * node, GPUs, port, state and progress, the fabric it uses), each shard's
 * cold-start receipt (the download with where its bytes came from, then the
 * engine's phases, as `llmgw describe replica` shows them), why it is where
 * it is (the placement explanation, as `llmgw explain` prints it), its last
 * failure with the log's end, its events, and the log tail of one shard live
 * over SSE. Everything above the log refreshes itself every 2 s.
 *
 * @module
 */
import { downloadSummary, type ShardDownload } from "../protocol/shard_download.ts";
import { COLD_START_COLUMNS, coldStartRows } from "../protocol/cold_start_receipt.ts";
import { formatBytes } from "../text/bytes.ts";
import type { ReplicaView } from "../control/views.ts";
import type { EventRecord } from "../control/store/store.ts";
import type { InventoryNode } from "../inventory/store.ts";
import { explanationLines } from "../placement/place.ts";
import { loadingPercent, replicaNote } from "./deployments_page.tsx";
import { Layout, type SessionView, StateBadge } from "./layout.tsx";
import { placementTexts } from "./replica_placement.ts";

/** Events shown. */
export const REPLICA_EVENTS = 50;

/** The fabric a shard's node is on, with its rate, or null. */
function fabricOf(
  nodes: ReadonlyMap<string, InventoryNode>,
  node: string,
): string | null {
  const fabrics = nodes.get(node)?.fabrics ?? [];
  if (fabrics.length === 0) return null;
  return fabrics.map((f) => `${f.fabric} ${f.rate_gbps === null ? "?" : `${f.rate_gbps} Gb/s`}`)
    .join(", ");
}

function time(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

/** The refreshing part: state, placement, explanation, failure and events. */
export function ReplicaFragment(props: {
  replica: ReplicaView;
  nodes: ReadonlyMap<string, InventoryNode>;
  events: EventRecord[];
}) {
  const r = props.replica;
  const pct = loadingPercent(r);
  const note = replicaNote(r);
  const explanation = r.explanation === null ? [] : explanationLines(r.explanation);
  const multiNode = new Set(r.shards.map((s) => s.node)).size > 1;
  const texts = placementTexts(r);
  return (
    <div
      id="replica"
      hx-get={`/ui/fragments/replicas/${encodeURIComponent(r.id)}`}
      hx-trigger="every 2s"
      hx-swap="outerHTML"
    >
      <div class="cards">
        <div class="card">
          <h3>State</h3>
          <div class="big">
            <StateBadge state={r.state} /> {pct === null ? null : <span>{pct}%</span>}
          </div>
          {pct === null ? null : (
            <div class="bar">
              <i style={`width:${pct}%`}></i>
            </div>
          )}
          {note === "" ? null : <div class={r.state === "failed" ? "problem" : "why"}>{note}</div>}
        </div>
        <div class="card">
          <h3>Deployment</h3>
          <dl class="kv">
            <dt>deployment</dt>
            <dd>
              <a href="/ui/deployments">{r.deployment}</a>
            </dd>
            <dt>profile</dt>
            <dd>{r.profile ?? "—"}</dd>
            <dt>shards</dt>
            <dd>{r.shards.length}{multiNode ? " (multi-node)" : ""}</dd>
          </dl>
        </div>
      </div>
      <div class="panel">
        <h2 style="margin-top:0">Placement</h2>
        {texts.empty !== null ? <div class="mute">{texts.empty}</div> : (
          <table>
            <thead>
              <tr>
                <th>Rank</th>
                <th>Shard</th>
                <th>Node</th>
                <th>GPUs</th>
                <th>Fabric</th>
                <th>Port</th>
                <th>State</th>
              </tr>
            </thead>
            <tbody>
              {r.shards.map((s) => (
                <tr>
                  <td>{s.rank}</td>
                  <td class="small">{s.shard_id}</td>
                  <td>
                    <a href={`/ui/?q=${encodeURIComponent(s.node)}`}>
                      {s.node}
                    </a>
                  </td>
                  <td class="small">{s.gpu_indices.join(", ")}</td>
                  <td class="small">
                    {fabricOf(props.nodes, s.node) ?? <span class="mute">none</span>}
                  </td>
                  <td class="small">{s.port === 0 ? "—" : s.port}</td>
                  <td>
                    <StateBadge state={s.state} />
                    {s.progress?.percent == null ? null : (
                      <span class="small">
                        {Math.round(s.progress.percent)}%
                      </span>
                    )}
                    {s.download === null ? null : <DownloadNote d={s.download} />}
                    {s.crash_loop === null ? null : (
                      <div class="problem small">
                        crash loop: {s.crash_loop.failures} failures in a row (gives up at{" "}
                        {s.crash_loop.limit})
                      </div>
                    )}
                    {s.restarts > 0 ? <div class="small mute">{s.restarts} restarts</div> : null}
                    {s.last_failure === null
                      ? null
                      : <div class="problem">{s.last_failure.reason}</div>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      <ColdStart replica={r} />
      <div class="grid2">
        <div class="panel">
          <h2 style="margin-top:0">{texts.heading}</h2>
          {explanation.length === 0
            ? <div class="mute">No explanation yet.</div>
            : <pre class="expl">{explanation.join("\n")}</pre>}
          {r.failure === null ? null : (
            <>
              <h2>Last failure</h2>
              <div class="problem">
                {r.failure.reason} (shard {r.failure.shard_id} on {r.failure.node},{" "}
                {r.failure.attempts} attempt{r.failure.attempts === 1 ? "" : "s"},{" "}
                {time(r.failure.at)})
              </div>
              {r.failure.log_tail.length === 0 ? null : (
                <pre
                  class="log"
                  style="margin-top:8px"
                >{r.failure.log_tail.join("\n")}</pre>
              )}
            </>
          )}
        </div>
        <div class="panel">
          <h2 style="margin-top:0">Events</h2>
          {props.events.length === 0 ? <div class="mute">No events.</div> : (
            <table class="ev">
              <tbody>
                {[...props.events].reverse().map((e) => (
                  <tr>
                    <td class="mute nowrap">{time(e.at)}</td>
                    <td class="nowrap">{e.kind}</td>
                    <td style="white-space:pre-wrap">{e.message}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      </div>
    </div>
  );
}

/** The replica page; `rank` is the shard whose log is followed. */
export function ReplicaPage(props: {
  replica: ReplicaView;
  nodes: ReadonlyMap<string, InventoryNode>;
  events: EventRecord[];
  rank: number;
  session: SessionView;
}) {
  const r = props.replica;
  const id = encodeURIComponent(r.id);
  return (
    <Layout title={r.id} page="replica" session={props.session}>
      <h1>
        <a href="/ui/deployments">Deployments</a> <span class="mute">/</span> {r.id}
      </h1>
      <ReplicaFragment replica={r} nodes={props.nodes} events={props.events} />
      <div class="panel">
        <div
          class="head"
          style="display:flex;gap:12px;align-items:center;margin-bottom:8px"
        >
          <h2 style="margin:0">Log</h2>
          {r.shards.length > 1
            ? r.shards.map((s) => (
              <a
                class={s.rank === props.rank ? "chip on" : "chip"}
                href={`/ui/replicas/${id}?rank=${s.rank}`}
              >
                rank {s.rank}
              </a>
            ))
            : null}
          <span id="log-status" class="mute small"></span>
        </div>
        {r.shards.length === 0 ? <div class="mute">No shard placed, so no log yet.</div> : (
          <pre
            class="log"
            id="log"
            data-src={`/ui/replicas/${id}/logs?rank=${props.rank}`}
            data-status="log-status"
          ></pre>
        )}
      </div>
    </Layout>
  );
}

/** A downloading shard's model download: summary, bytes, sources, the last error (issue #25). */
function DownloadNote(props: { d: ShardDownload }) {
  const d = props.d;
  return (
    <div class="small" data-download>
      <span>{downloadSummary(d)}</span>
      <div class="mute">
        {formatBytes(d.bytes_done)} of {formatBytes(d.bytes_total)} of{" "}
        {d.commit === null ? d.model : `${d.model}@${d.commit.slice(0, 12)}`}
        {d.sources.length === 0 ? null : ` from ${d.sources.join(", ")}`}
      </div>
      {d.last_error === null ? null : <div class="problem">{d.last_error}</div>}
    </div>
  );
}

/** Each shard's cold-start receipt, phase by phase; nothing when no shard reported one. */
function ColdStart(props: { replica: ReplicaView }) {
  const shards = props.replica.shards.filter((s) => s.cold_start !== null);
  if (shards.length === 0) return null;
  return (
    <div class="panel" data-cold-start>
      <h2 style="margin-top:0">Cold start</h2>
      {shards.map((s) => (
        <>
          <div class="small mute">
            rank {s.rank} on {s.node}, spawned {time(s.cold_start!.spawned_at)}
          </div>
          <table>
            <thead>
              <tr>{COLD_START_COLUMNS.map((c) => <th key={c}>{c.toLowerCase()}</th>)}</tr>
            </thead>
            <tbody>
              {coldStartRows(s.cold_start!).map((row) => (
                <tr key={row[0]} data-phase={row[0]}>
                  {row.map((cell, i) => <td key={i} class="small">{cell}</td>)}
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ))}
    </div>
  );
}
