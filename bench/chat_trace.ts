/**
 * A seeded multi-turn workload for the routing benchmark (issue #16):
 * chat sessions (a few turns) and agent sessions (many turns whose tool
 * results make the history grow fast), all behind one of two long shared
 * system prompts, arriving in bursts. Pure: the same seed gives the same
 * trace, so each routing policy replays the same work.
 *
 * A turn's request is the whole conversation so far, as a client sends it:
 * the system prompt, every earlier user turn and assistant reply, and the
 * new user turn. Assistant replies come from the trace, not the engine, so
 * the prompts do not depend on which replica answered.
 *
 * @module
 */
import { rng } from "./synthetic_cluster.ts";

/** One chat message. */
export interface TraceMessage {
  /** system, user or assistant. */
  role: "system" | "user" | "assistant";
  /** Its text. */
  content: string;
}

/** One session: when it starts, and its turns. */
export interface TraceSession {
  /** Session id (also sent as nothing: routing must find the affinity from the body). */
  id: string;
  /** chat or agent. */
  kind: "chat" | "agent";
  /** When the first turn is sent, ms after the start. */
  startMs: number;
  /** Each turn: the user message, the assistant's reply the trace supplies, and the pause after it. */
  turns: { user: string; assistant: string; thinkMs: number }[];
  /** The system prompt. */
  system: string;
}

/** Settings of {@link chatTrace}. */
export interface TraceOptions {
  /** Sessions in all. Default 120. */
  sessions?: number;
  /** The share of agent sessions. Default 0.3. */
  agentShare?: number;
  /** Over how long sessions start (ms). Default 20,000. */
  spreadMs?: number;
  /** Bursts: the share of sessions that start together at one of a few instants. Default 0.4. */
  burstShare?: number;
  /** Seed. Default 42. */
  seed?: number;
}

const WORDS = (
  "model replica gateway cache prefix token latency throughput cluster node fabric shard " +
  "engine request session history context window batch schedule placement memory kernel " +
  "tensor pipeline parallel deploy rollout metric trace budget region zone rack switch link"
).split(" ");

/** `n` words of seeded filler text. */
function words(random: () => number, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(random() * WORDS.length)]);
  return out.join(" ");
}

/** An exponential pause with mean `mean` ms. */
function pause(random: () => number, mean: number): number {
  return Math.round(-Math.log(1 - random()) * mean);
}

/** The two shared system prompts: long enough that a router keying on them would collapse. */
export function systemPrompts(seed = 7): [string, string] {
  const r = rng(seed);
  return [
    `You are a helpful assistant for a platform team. ${words(r, 300)}`,
    `You are a coding agent with tools: search, read_file, run_tests. ${words(r, 400)}`,
  ];
}

/** The trace. */
export function chatTrace(options: TraceOptions = {}): TraceSession[] {
  const random = rng(options.seed ?? 42);
  const n = options.sessions ?? 120;
  const spread = options.spreadMs ?? 20_000;
  const bursts = [0.15, 0.5, 0.8].map((f) => Math.round(f * spread));
  const [chatSystem, agentSystem] = systemPrompts();
  const sessions: TraceSession[] = [];
  for (let i = 0; i < n; i++) {
    const agent = random() < (options.agentShare ?? 0.3);
    const inBurst = random() < (options.burstShare ?? 0.4);
    const startMs = inBurst
      ? bursts[Math.floor(random() * bursts.length)] + Math.floor(random() * 200)
      : Math.floor(random() * spread);
    const turnCount = agent ? 8 + Math.floor(random() * 8) : 2 + Math.floor(random() * 5);
    const turns = [];
    for (let t = 0; t < turnCount; t++) {
      turns.push(
        agent
          ? {
            // A tool call's result: long, and it stays in the history.
            user: `tool result ${t}: ${words(random, 120 + Math.floor(random() * 200))}`,
            assistant: `calling a tool: ${words(random, 20)}`,
            thinkMs: pause(random, 300),
          }
          : {
            user: `question ${t} from session ${i}: ${
              words(random, 30 + Math.floor(random() * 60))
            }`,
            assistant: words(random, 60 + Math.floor(random() * 80)),
            thinkMs: pause(random, 1_500),
          },
      );
    }
    sessions.push({
      id: `s${i}`,
      kind: agent ? "agent" : "chat",
      startMs,
      turns,
      system: agent ? agentSystem : chatSystem,
    });
  }
  return sessions.sort((a, b) => a.startMs - b.startMs || a.id.localeCompare(b.id));
}

/** The messages of turn `t` (0-based) of `s`: the history and the new user message. */
export function turnMessages(s: TraceSession, t: number): TraceMessage[] {
  const out: TraceMessage[] = [{ role: "system", content: s.system }];
  for (let i = 0; i < t; i++) {
    out.push({ role: "user", content: s.turns[i].user });
    out.push({ role: "assistant", content: s.turns[i].assistant });
  }
  out.push({ role: "user", content: s.turns[t].user });
  return out;
}
