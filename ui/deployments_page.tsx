/**
 * The deployments page (/ui/deployments): each deployment with ready over
 * desired replicas and a scale control, and its replicas' lifecycle live —
 * pending with the explanation's summary, downloading with percent, rate
 * and ETA, starting, loading with percent,
 * ready, failed with the reason. The list refreshes itself every second; the
 * scale inputs are kept across refreshes (`hx-preserve`).
 *
 * @module
 */
import type { ReplicaState, ReplicaView } from "../control/views.ts";
import type { StoredDeployment } from "../control/store/store.ts";
import { Layout, type SessionView, StateBadge } from "./layout.tsx";
import { compareNatural } from "../text/natural_order.ts";
import { shortCommit } from "../deployment/model_revision.ts";
import { downloadSummary } from "../protocol/shard_download.ts";

/** Replica states in lifecycle order. */
const REPLICA_STATES: readonly ReplicaState[] = [
  "pending",
  "downloading",
  "starting",
  "loading",
  "ready",
  "failed",
];

/** How often the list refreshes, in seconds. */
const REFRESH_S = 1;

/** A replica's loading percent: the least-loaded loading shard's, or null. */
export function loadingPercent(r: ReplicaView): number | null {
  const known = r.shards.map((s) => s.progress?.percent).filter((
    p,
  ): p is number => typeof p === "number");
  return r.state !== "loading" || known.length === 0 ? null : Math.round(Math.min(...known));
}

/** What a replica's row says beside its state: why pending, the failure, or where it runs. */
export function replicaNote(r: ReplicaView): string {
  if (r.state === "pending") {
    return r.explanation?.summary ?? "waiting for placement";
  }
  if (r.state === "failed") {
    const shard = r.shards.find((s) => s.last_failure !== null)?.last_failure
      ?.reason;
    return r.failure?.reason ?? shard ?? "failed";
  }
  const downloading = r.shards.find((s) => s.download !== null);
  if (r.state === "downloading" && downloading?.download) {
    return `downloading on ${downloading.node}: ${downloadSummary(downloading.download)}`;
  }
  const looping = r.shards.find((s) => s.crash_loop !== null);
  if (looping?.crash_loop) {
    const c = looping.crash_loop;
    return `crash loop ${c.failures}/${c.limit} on ${looping.node}: ${
      looping.last_failure?.reason ?? "failing"
    }`;
  }
  return "";
}

function nodesOf(r: ReplicaView): string {
  return [...new Set(r.shards.map((s) => s.node))].join(", ");
}

function ReplicaTr(props: { r: ReplicaView }) {
  const r = props.r;
  const pct = loadingPercent(r);
  const note = replicaNote(r);
  return (
    <tr data-replica={r.id}>
      <td>
        <a href={`/ui/replicas/${encodeURIComponent(r.id)}`}>
          <b>{r.id}</b>
        </a>
      </td>
      <td>
        <StateBadge state={r.state} />
      </td>
      <td class="small">{r.profile ?? <span class="mute">—</span>}</td>
      <td class="small">{nodesOf(r) || <span class="mute">—</span>}</td>
      <td class="small">
        {pct === null ? null : (
          <div class="nowrap">
            <div
              class="bar"
              style="display:inline-block;width:120px;vertical-align:middle"
            >
              <i style={`width:${pct}%`}></i>
            </div>{" "}
            {pct}%
          </div>
        )}
        {note === "" ? null : <div class={r.state === "failed" ? "problem" : "why"}>{note}</div>}
      </td>
    </tr>
  );
}

function DeploymentPanel(
  props: { d: StoredDeployment; replicas: ReplicaView[] },
) {
  const { d, replicas } = props;
  const ready = replicas.filter((r) => r.state === "ready").length;
  const name = encodeURIComponent(d.name);
  return (
    <section class="panel deploy" data-deployment={d.name}>
      <div class="head">
        <h2>{d.name}</h2>
        <span class="mute small">{d.spec.model}</span>
        {d.spec.revision === undefined
          ? null
          : (
            <span class="mute small" title={d.model_commit ?? "not resolved yet"}>
              @{d.spec.revision} {d.model_commit ? shortCommit(d.model_commit) : "(unresolved)"}
            </span>
          )}
        <span
          class={`badge ${ready === d.spec.replicas ? "s-ready" : "s-pending"}`}
        >
          {ready}/{d.spec.replicas} ready
        </span>
        <span class="mute small">model name {d.spec.served_model_name}</span>
        <form
          id={`scale-${d.name}`}
          hx-preserve="true"
          hx-post={`/ui/deployments/${name}/scale`}
          hx-swap="none"
          style="margin-left:auto"
        >
          <input
            type="number"
            name="replicas"
            min="0"
            max="10000"
            value={String(d.spec.replicas)}
            aria-label={`Replicas of ${d.name}`}
            style="width:80px"
          />{" "}
          <button type="submit">Scale</button>
        </form>
      </div>
      {replicas.length === 0 ? <div class="mute small">No replicas.</div> : (
        <table>
          <thead>
            <tr>
              <th>Replica</th>
              <th>State</th>
              <th>Profile</th>
              <th>Nodes</th>
              <th>Progress</th>
            </tr>
          </thead>
          <tbody>{replicas.map((r) => <ReplicaTr key={r.id} r={r} />)}</tbody>
        </table>
      )}
    </section>
  );
}

function ordinal(id: string): number {
  return Number(/-r(\d+)$/.exec(id)?.[1] ?? Number.MAX_SAFE_INTEGER);
}

/** The list of deployments and their replicas; it refreshes itself. */
export function DeploymentsFragment(props: {
  deployments: StoredDeployment[];
  replicas: ReplicaView[];
}) {
  const byDeployment = new Map<string, ReplicaView[]>();
  for (const r of props.replicas) {
    byDeployment.set(r.deployment, [
      ...byDeployment.get(r.deployment) ?? [],
      r,
    ]);
  }
  const sorted = [...props.deployments].sort((a, b) => compareNatural(a.name, b.name));
  return (
    <div
      id="deployments"
      hx-get="/ui/fragments/deployments"
      hx-trigger={`every ${REFRESH_S}s, deployments-changed from:body`}
      hx-swap="outerHTML"
    >
      <div class="chips" style="margin-bottom:14px">
        {REPLICA_STATES.map((s) => (
          <span class="chip">
            <StateBadge state={s} /> <b>{props.replicas.filter((r) => r.state === s).length}</b>
          </span>
        ))}
      </div>
      {sorted.length === 0
        ? (
          <div class="panel mute">
            No deployments. Apply one with <code>llmgw apply -f FILE</code>.
          </div>
        )
        : null}
      {sorted.map((d) => (
        <DeploymentPanel
          d={d}
          replicas={(byDeployment.get(d.name) ?? []).sort((a, b) =>
            ordinal(a.id) - ordinal(b.id) || compareNatural(a.id, b.id)
          )}
        />
      ))}
    </div>
  );
}

/** The deployments page. */
export function DeploymentsPage(props: {
  deployments: StoredDeployment[];
  replicas: ReplicaView[];
  session: SessionView;
}) {
  return (
    <Layout title="Deployments" page="deployments" session={props.session}>
      <h1>Deployments</h1>
      <DeploymentsFragment
        deployments={props.deployments}
        replicas={props.replicas}
      />
    </Layout>
  );
}
