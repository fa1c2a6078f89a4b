/**
 * The admin commands' help: one text per command, printed by
 * `llmgw CMD --help` and `llmgw help CMD`, and the summary in `llmgw help`.
 *
 * @module
 */

const CONNECTION = `Connection (every admin command):
  --url URL[,URL…]   control plane(s), tried in order (or LLMGW_URL)
  --token-file PATH  admin token from a file (or LLMGW_TOKEN_FILE, LLMGW_TOKEN;
                     --token T works too, but shows in ps)
  LLMGW_CA           the cluster CA certificate to trust
  --json             print JSON instead of a table (mutations: the object changed)
  -h, --help         this help`;

/** Help text of each admin command, without the connection block. */
const TEXTS: Readonly<Record<string, string>> = {
  get:
    `Usage: llmgw get nodes|deployments|replicas|events|models [NAME…] [-o wide|json|yaml] [--limit N]

Lists a kind of object, or the objects named (several names: each one; a
name that is not found is reported and the others printed, exit 1).
Deployments show READY as ready replicas / desired; replicas one line per
shard; events one line each (long messages cut at a word; the whole text is
in describe and --json); get events takes one SUBJECT at most. Models are
the model revisions deployments use and agents hold: size, pinned, and each
host's copy (complete, downloading n%, requested by a pull, or failed with
why, when its pull failed for good; failed hosts first).
Deployments in -o json or -o yaml are their specs as apply -f takes them:
  llmgw get deployments llama-8b -o yaml > llama-8b.yaml
  llmgw apply -f llama-8b.yaml
Events of one subject (get events deployment/NAME) are those of the object
that has the name now, not of an earlier one deleted under it.
  -o wide        more columns; -o json is --json; -o yaml the same as YAML
  --limit N      events: the last N (default 50)
  --incarnation all|UID
                 events of a subject: every object that had the name, or one
                 (its UID from -o wide or --json)`,
  nodes: `Usage: llmgw nodes [NODE…] [-o wide|json|yaml]

Lists nodes with state and GPUs (the same as llmgw get nodes).`,
  describe: `Usage: llmgw describe node|deployment|replica|model NAME… [--json]

Everything about each object named: state, placement, the explanation on the live
inventory (what llmgw plan would say now), last failure with its log tail,
and recent events. A model (org/name): each revision's commit, size, facts,
pin, deployments, and each host's copy.`,
  explain: `Usage: llmgw explain DEPLOYMENT|REPLICA… [--json]

Why each replica is where it is, or why it is pending: its state, its last
failure with the log tail, and the placement explanation on the live
inventory, every rejected node by name on a small fleet and grouped by
reason on a large one.`,
  logs: `Usage: llmgw logs REPLICA [-f] [--shard N] [--lines N] [--json]

A shard's recent log lines, fetched from its agent.
  -f, --follow   keep printing new lines until Ctrl-C
  --shard N      the shard's rank (default 0)
  --lines N      how many lines from the end (default 100)`,
  apply: `Usage: llmgw apply -f FILE|DIR|- [-f …] [--dry-run] [--json]

Creates or updates deployments from YAML or JSON: a file, every .yaml, .yml
and .json file in a directory (in name order), or standard input (-).
A YAML file may hold several documents separated by ---.
Prints one line per deployment: created, updated (a new revision: its
replicas are replaced one at a time), scaled or configured (nothing
restarts), or unchanged (nothing stored: re-applying is safe).
  -f, --file     where to read (repeatable)
  --dry-run      the control plane validates each document and shows what
                 would change against the live spec and which replicas
                 would be replaced; nothing changes`,
  scale: `Usage: llmgw scale DEPLOYMENT N [--json]

Changes one deployment's replica count. Nothing else restarts.`,
  delete: `Usage: llmgw delete [deployment] DEPLOYMENT… [--json]
       llmgw delete node NODE… [--json]

A deployment: stops its replicas and frees their GPUs. A node: removes it
from the inventory and the fleet (a decommissioned or mistyped node). Only
a node that holds no replica and is lost, cordoned or draining can go:
drain a live node first (llmgw drain NODE), and stop its agent, or it
registers again. Several names: each one; a failure is reported and the
others go on (exit 1).`,
  cordon: `Usage: llmgw cordon NODE… [--json]

No new replicas are placed on NODE; what runs there stays. Survives the
node's re-registration.`,
  uncordon: `Usage: llmgw uncordon NODE… [--json]

NODE takes new replicas again.`,
  drain: `Usage: llmgw drain NODE… [--timeout D] [--json]

Moves each NODE's replicas elsewhere (replacements start first when
capacity allows) and waits until the node holds none, printing a line each
time that changes. Exits 1 when --timeout runs out first (the drain goes
on) or the node stops draining (uncordoned).
  --timeout D    stop waiting after D, e.g. 90s, 10m, 1h (default 0: no limit;
                 Ctrl-C stops too)`,
  events: `Usage: llmgw events [SUBJECT] [--limit N] [--incarnation UID] [--json]

Recent events, one line each (the same as llmgw get events).
  --limit N      the last N (default 50)
  --incarnation UID
                 only those about one object (its UID from get events -o wide)`,
  apikeys: `Usage: llmgw apikeys create NAME [--models a,b] | list | delete ID

Gateway API keys. A new key is shown once.
  --models a,b   the served models it may call (default: all)`,
  tokens: `Usage: llmgw tokens create KIND [--ttl D] [--description T] | list [KIND] | revoke ID

Access tokens, shown once: admin, gateway (the endpoint feed only), metrics
(GET /metrics only) or join.
  --ttl D          30m, 12h, 7d or never (join tokens default to 24h)
  --description T  what it is for`,
  models: `Usage: llmgw models pull DEPLOYMENT [--nodes NODE,NODE…] [--json]

Fetches the deployment's model revision (the commit it resolved to) into the
model caches of the nodes named, or of every ready node with a GPU class of
its profiles, without holding a GPU: replicas placed there later start
without a download (placement prefers nodes that hold it). Nodes that hold it
already are left alone. Follow the progress with llmgw get models.
  --nodes N,N    the nodes to fetch onto

       llmgw models pulls [--json]
Lists the pulls under way, then those finished in the last day (at most
100): each node requested, done, failed (with why) or cancelled. Pulls
survive a control plane restart.

       llmgw models cancel PULL [--nodes NODE,NODE…] [--json]
Stops asking the nodes named (default: every node still asked) to fetch the
pull PULL: org/name@commit, the commit in full or its first 7 or more hex
digits, as models pulls lists it. Says which nodes named were no longer
asked, and why; fails when none was. What they fetched stays in their
caches until evicted, and a rollout's pre-pull does not ask them again.`,
};

/** The admin commands that have help, in the order `llmgw help` lists them. */
export const ADMIN_HELP_TOPICS: readonly string[] = Object.keys(TEXTS);

/** The help of one admin command, or null when there is none. */
export function adminHelp(verb: string, extra: Record<string, string> = {}): string | null {
  const text = (extra[verb] ?? TEXTS[verb])?.trimEnd();
  return text === undefined ? null : `${text}\n\n${CONNECTION}\n`;
}

/** Usage of the admin commands, for `llmgw help`. */
export const ADMIN_USAGE =
  `Admin commands (control plane from --url or LLMGW_URL, token from LLMGW_TOKEN[_FILE]):
  get nodes|deployments|replicas|events|models [NAME…] [-o wide|json|yaml]
                                       list them (READY for deployments)
  describe node|deployment|replica|model NAME…
                                       state, placement, live explanation, failures, events
  explain DEPLOYMENT|REPLICA…          why its replicas are where they are, or pending
  logs REPLICA [-f]                    a shard's log lines, from its agent; -f follows
  apply -f FILE|DIR|-                  create or update deployments (YAML or JSON)
  scale DEPLOYMENT N                   change the replica count
  delete DEPLOYMENT…                   stop their replicas and free their GPUs
  delete node NODE…                    remove nodes that are lost, cordoned or drained
  rollout status|history|undo DEPLOYMENT
                                       wait for, list or undo a deployment's rolling update
  cordon|uncordon|drain NODE…          operator intent (survives re-registration);
                                       drain waits until the nodes are empty
  nodes, events                        short for get nodes, get events
  apikeys create|list|delete           gateway API keys
  tokens create|list|revoke            access tokens (admin, gateway, metrics, join)
  models pull DEPLOYMENT [--nodes …]   fetch its model revision onto nodes, no GPU held
  models pulls | cancel PULL           list pulls; stop one
Every command takes --json and --help.
`;
