/**
 * The PostgreSQL store's fenced statements (design §11.1): each write is one
 * statement whose `fence` CTE takes the lease row `FOR SHARE` and yields a row
 * only while it still names this instance's term, so a takeover waits for
 * writes in flight and a deposed leader's later writes change nothing. Every
 * statement answers `fenced` (1 when the term held) and `n` (rows written).
 * $1 is always `epoch/holder`; record writes take the change payload as $2
 * and their values from $3.
 *
 * @module
 */
import { MAX_EVENTS } from "./store.ts";
import { CHANGE_CHANNEL } from "./postgres_changes.ts";
import { postgresUpsert, type Table } from "./tables.ts";

/**
 * The fence: the lease row, locked against a takeover, if it still names this
 * term and holder ($1 is `epoch/holder`: an epoch alone could repeat if a
 * database failover lost the commit of a takeover).
 */
export const FENCE = `SELECT epoch FROM llmgw_leader
   WHERE id = 1 AND epoch::text || '/' || holder = $1 AND expires_at > now() FOR SHARE`;

/** The change notice of a record write: followers hear the key, and the change sequence moves. */
const NOTE =
  `SELECT pg_notify('${CHANGE_CHANNEL}', $2), nextval('llmgw_change_seq') AS seq FROM fence`;

/** The fenced upsert of one record of `table`. */
export function fencedUpsert<R>(table: Table<R>): string {
  return `WITH fence AS (${FENCE}), note AS (${NOTE}),
       w AS (${postgresUpsert(table, 3)} RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n`;
}

/** The fenced delete of the row whose `column` is $3. */
export function fencedDelete(table: string, column: string): string {
  return `WITH fence AS (${FENCE}), note AS (${NOTE}),
       w AS (DELETE FROM ${table} WHERE ${column} = $3 AND EXISTS (SELECT 1 FROM note) RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n`;
}

/**
 * Nodes' last-seen times ($2 ids, $3 times). The change sequence does not
 * move: a follower reloading its whole state for a last-seen time would cost
 * more than the time is worth (it reads it at its next reload, or on taking over).
 */
export const RECORD_SEEN = `WITH fence AS (${FENCE}),
       w AS (UPDATE nodes SET last_seen_at = s.at, epoch = fence.epoch
             FROM fence, unnest($2::text[], $3::bigint[]) AS s(id, at)
             WHERE nodes.id = s.id RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n`;

/** One event ($2 … $6: at, kind, subject, message, uid), keeping the newest {@link MAX_EVENTS}. */
export const ADD_EVENT = `WITH fence AS (${FENCE}),
       w AS (INSERT INTO events (at, kind, subject, message, uid, epoch)
             SELECT $2, $3, $4, $5, $6, epoch FROM fence RETURNING id),
       prune AS (DELETE FROM events WHERE id <= (SELECT id FROM w) - ${MAX_EVENTS} RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT id FROM w) AS id,
         (SELECT count(*) FROM prune)::int AS pruned`;

/** Events in order (arrays $2 … $6 as {@link ADD_EVENT}), keeping the newest {@link MAX_EVENTS}. */
export const ADD_EVENTS = `WITH fence AS (${FENCE}),
       w AS (INSERT INTO events (at, kind, subject, message, uid, epoch)
             SELECT e.at, e.kind, e.subject, e.message, e.uid, fence.epoch
             FROM fence, unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
               WITH ORDINALITY AS e(at, kind, subject, message, uid, n)
             ORDER BY e.n RETURNING id),
       prune AS (DELETE FROM events WHERE id <= (SELECT max(id) FROM w) - ${MAX_EVENTS} RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n,
         (SELECT count(*) FROM prune)::int AS pruned`;
