/**
 * One shard's engine log as Server-Sent Events (docs/ui.md): the status
 * line, the lines kept after the reader's Last-Event-ID (a `gap` event when
 * some are no longer kept), then each new line as it comes, every one with
 * an id of the log's epoch and sequence number so a reconnect resumes.
 *
 * @module
 */
import type { SSEStreamingApi } from "hono/streaming";
import type { LogFollowers, LogNews } from "../log_follower.ts";
import { lineId, resumeAfter } from "../log_resume.ts";

/** How often an idle SSE stream sends a comment, so proxies keep it open. */
const SSE_KEEPALIVE_MS = 15_000;

/**
 * Streams the log of the shard of `rank` of `replica` to `stream` until the
 * reader goes away, resuming after `lastEventId` (null: from the start of
 * what is kept).
 */
export async function streamShardLog(
  stream: SSEStreamingApi,
  followers: LogFollowers,
  replica: string,
  rank: number,
  lastEventId: string | null,
): Promise<void> {
  const queue: LogNews[] = [];
  let wake: (() => void) | null = null;
  const watch = followers.watch(replica, rank, (n) => {
    queue.push(n);
    wake?.();
  });
  stream.onAbort(() => {
    watch.close();
    wake?.();
  });
  try {
    await watch.ready;
    const window = watch.window();
    const resume = resumeAfter(window, lastEventId);
    await stream.writeSSE({
      event: "status",
      data: watch.status() ?? "",
      retry: 1000,
    });
    if (resume.gap) {
      await stream.writeSSE({
        event: "gap",
        data: "earlier lines are no longer kept",
      });
    }
    let last = 0;
    for (const l of resume.lines) {
      await stream.writeSSE({
        data: l.text,
        id: lineId(window.epoch, l.seq),
      });
      last = l.seq;
    }
    // Lines a reader already has come again through the queue only if newer.
    if (resume.lines.length === 0) last = window.next - 1;
    while (!stream.aborted) {
      const news = queue.shift();
      if (news === undefined) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const idle = await new Promise<boolean>((resolve) => {
          wake = () => resolve(false);
          timer = setTimeout(() => resolve(true), SSE_KEEPALIVE_MS);
        });
        clearTimeout(timer);
        wake = null;
        if (idle && !stream.aborted) {
          await stream.write(": keep-alive\n\n");
        }
        continue;
      }
      if (news.kind === "status") {
        await stream.writeSSE({ event: "status", data: news.message });
        continue;
      }
      const fresh = news.lines.filter((l) => l.seq > last);
      if (fresh.length === 0) continue;
      if (news.gap) {
        await stream.writeSSE({
          event: "gap",
          data: "lines may be missing here",
        });
      }
      for (const l of fresh) {
        await stream.writeSSE({
          data: l.text,
          id: lineId(window.epoch, l.seq),
        });
        last = l.seq;
      }
    }
  } finally {
    watch.close();
  }
}
