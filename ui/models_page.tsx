/**
 * The models page (/ui/models, docs/ui.md; issue #25 item 5): every model
 * revision the fleet serves or holds, as `llmgw get models` lists it (the
 * control plane's control/model_views.ts): revision and commit, size,
 * pinned, the deployments using it, and its hosts' copies (complete,
 * downloading n%, requested, failed with its agent's words), counted by
 * state with the failed and then the first few named, so
 * a revision on a thousand hosts stays one row. The list refreshes itself
 * every 2 s.
 *
 * @module
 */
import {
  MODEL_HOST_STATES,
  type ModelHostView,
  type ModelRevisionView,
} from "../protocol/model_admin.ts";
import {
  failedFirst,
  hostState,
  revisionCell,
  WHY_IN_LIST,
} from "../protocol/model_revision_text.ts";
import { formatBytes } from "../text/bytes.ts";
import { Layout, type SessionView } from "./layout.tsx";

/** How often the list refreshes, in seconds. */
const REFRESH_S = 2;

/** Hosts a row names; the rest are only counted. */
export const HOSTS_NAMED = 6;

/** `3 complete · 1 downloading · 1 requested · 1 failed`; empty for none. */
export function hostCounts(hosts: readonly ModelHostView[]): string {
  const counts = new Map<string, number>();
  for (const h of hosts) counts.set(h.state, (counts.get(h.state) ?? 0) + 1);
  return MODEL_HOST_STATES
    .filter((s) => counts.has(s))
    .map((s) => `${counts.get(s)} ${s}`)
    .join(" · ");
}

/** A host's copy in a row; a failure's words cut, whole in the line's title. */
function HostLine(props: { h: ModelHostView }) {
  const h = props.h;
  const whole = hostState(h);
  const cut = hostState(h, WHY_IN_LIST);
  return (
    <div
      class={h.state === "failed" ? "problem" : "nowrap mute"}
      title={cut === whole ? undefined : whole}
    >
      {h.node} {cut}
    </div>
  );
}

function ModelTr(props: { v: ModelRevisionView }) {
  const v = props.v;
  const named = failedFirst(v.hosts).slice(0, HOSTS_NAMED);
  const more = v.hosts.length - named.length;
  return (
    <tr data-model={v.model} data-commit={v.commit ?? ""}>
      <td>
        <b>{v.model}</b>
      </td>
      <td class="nowrap">
        <code>{revisionCell(v)}</code>
      </td>
      <td class="nowrap">{v.bytes === null ? "?" : formatBytes(v.bytes)}</td>
      <td>{v.pinned ? "pinned" : <span class="mute">no</span>}</td>
      <td class="small">
        {v.deployments.length === 0 ? <span class="mute">none</span> : v.deployments.join(", ")}
      </td>
      <td class="small">
        {v.hosts.length === 0 ? <span class="mute">on no host</span> : (
          <>
            <div>{hostCounts(v.hosts)}</div>
            {named.map((h) => <HostLine key={h.node} h={h} />)}
            {more > 0 ? <div class="mute">and {more} more</div> : null}
          </>
        )}
      </td>
    </tr>
  );
}

/** The list of model revisions; it refreshes itself. */
export function ModelsFragment(props: { models: readonly ModelRevisionView[] }) {
  return (
    <div
      id="models"
      class="panel"
      hx-get="/ui/fragments/models"
      hx-trigger={`every ${REFRESH_S}s`}
      hx-swap="outerHTML"
    >
      {props.models.length === 0
        ? (
          <div class="mute">
            No model revisions: no deployment names one and no agent reports one in its cache.
          </div>
        )
        : (
          <table>
            <thead>
              <tr>
                <th>Model</th>
                <th>Revision</th>
                <th>Size</th>
                <th>Pinned</th>
                <th>Deployments</th>
                <th>Hosts</th>
              </tr>
            </thead>
            <tbody>
              {props.models.map((v) => (
                <ModelTr key={`${v.model}@${v.commit ?? v.revision}`} v={v} />
              ))}
            </tbody>
          </table>
        )}
    </div>
  );
}

/** The models page. */
export function ModelsPage(props: { models: readonly ModelRevisionView[]; session: SessionView }) {
  return (
    <Layout title="Models" page="models" session={props.session}>
      <h1>Models</h1>
      <ModelsFragment models={props.models} />
    </Layout>
  );
}
