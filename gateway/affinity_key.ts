/**
 * The affinity key of a request (design §12, issue #16): what prefix-affinity
 * routing hashes so a conversation keeps returning to the replica that holds
 * its KV cache.
 *
 * In order:
 * 1. A session header the client sets: `x-session-id` (also `x-llmgw-session`).
 * 2. Chat completions and the Responses API: the conversation's first user
 *    message. Every later turn starts with it, and it differs between
 *    conversations even when they share a system prompt.
 * 3. Completions: the first {@link PROMPT_PREFIX_CHARS} characters of the
 *    prompt (its first blocks). A prompt that begins with a long shared
 *    preamble should carry a session header instead.
 *
 * Never the system prompt alone: that would send every session of an
 * application to one replica. No key (embeddings, or nothing usable) means
 * the request is routed by load alone.
 *
 * @module
 */

/** Headers a client may name its session with, in order of precedence. */
export const SESSION_HEADERS: readonly string[] = ["x-session-id", "x-llmgw-session"];

/** How much of a completions prompt identifies it. */
export const PROMPT_PREFIX_CHARS = 1024;

/** The longest header value or message taken in whole; longer ones are cut (they still differ early). */
const MAX_KEY_CHARS = 4096;

/** The text of a message's content: a string, or the text parts of a content array. */
function contentText(content: unknown): string | null {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return null;
  const parts: string[] = [];
  for (const p of content) {
    if (typeof p === "string") parts.push(p);
    else if (p !== null && typeof p === "object") {
      const text = (p as { text?: unknown }).text;
      if (typeof text === "string") parts.push(text);
    }
  }
  return parts.length > 0 ? parts.join("\n") : null;
}

/** The first user message's text in a list of chat messages or Responses input items. */
function firstUserText(items: unknown): string | null {
  if (!Array.isArray(items)) return null;
  for (const m of items) {
    if (m === null || typeof m !== "object") continue;
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (role !== "user") continue;
    const text = contentText(content);
    if (text !== null && text !== "") return text;
  }
  return null;
}

/**
 * The affinity key of a request to `path` with `headers` and a parsed JSON
 * `body`, or null when it has none.
 */
export function affinityKey(path: string, headers: Headers, body: unknown): string | null {
  for (const name of SESSION_HEADERS) {
    const v = headers.get(name)?.trim();
    if (v) return `session:${v.slice(0, MAX_KEY_CHARS)}`;
  }
  if (body === null || typeof body !== "object") return null;
  const b = body as { messages?: unknown; input?: unknown; prompt?: unknown };
  if (path.endsWith("/chat/completions")) {
    const text = firstUserText(b.messages);
    return text === null ? null : `user:${text.slice(0, MAX_KEY_CHARS)}`;
  }
  if (path.endsWith("/responses")) {
    if (typeof b.input === "string" && b.input !== "") {
      return `user:${b.input.slice(0, MAX_KEY_CHARS)}`;
    }
    const text = firstUserText(b.input);
    return text === null ? null : `user:${text.slice(0, MAX_KEY_CHARS)}`;
  }
  if (path.endsWith("/completions")) {
    const prompt = Array.isArray(b.prompt) ? b.prompt[0] : b.prompt;
    if (typeof prompt !== "string" || prompt === "") return null;
    return `prompt:${prompt.slice(0, PROMPT_PREFIX_CHARS)}`;
  }
  return null;
}
