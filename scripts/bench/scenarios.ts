import { conversationBodies, echoedMessages, USER_MESSAGES } from './chat-body.js';

/**
 * The scenarios of issue 45, where users feel the cost: turnover (short sessions), the steady
 * state with a full history (long sessions), streams back to back, and many streams paced
 * like a model. Each measures the floor (the persisted pass-through) and the service on both
 * databases in the same run, each started afresh for it, and reads every cell as a ratio to
 * the floor's.
 */
export const SESSION_SCENARIOS = ['short-sessions', 'long-sessions', 'streams', 'paced-streams'] as const;
/** One of the scenarios measured against the floor. */
export type SessionScenario = (typeof SESSION_SCENARIOS)[number];

/** Messages of a session's history the floor keeps and the service places in the context (its `memory.short_term_turns` default). */
export const HISTORY_MESSAGES = 20;
/** Turns of a short session: a client starts a new session after this many. */
export const SHORT_SESSION_TURNS = 5;
/** Content chunks of a streamed reply in the stream scenarios. */
export const STREAM_CHUNKS = 200;
/** The pause between chunks of a paced stream, in ms: 200 chunks take about 4 s, as a model's reply does. */
export const PACE_MS = 20;
/** The window of the paced-streams cell: the streams finished in it are counted. */
export const PACED_WINDOW_MS = 12_000;
/** Turns each client's session takes before a window that needs a full history opens (20 messages, and two turns to spare). */
const FILL_TURNS = HISTORY_MESSAGES / 2 + 2;

/** The sizes a run gives the scenarios (`--duration`, `--warmup`, `--short-sessions`, `--paced-streams`). */
export type ScenarioSizes = { durationMs: number; warmup: number; shortSessions: number; pacedStreams: number };

/** One cell of a scenario, as each target is measured in it. */
export type ScenarioCell = {
  connections: number;
  stream: boolean;
  /** The streamed reply's content chunks (the echo of a message a word shorter); absent: the bench's ~50-word messages. */
  chunks?: number;
  /** The pause between streamed chunks, asked for by a magic word in each message. */
  paceMs?: number;
  /** A client starts a new session after this many turns; absent: one session per client throughout. */
  turnsPerSession?: number;
  /** Requests before the window opens, at the cell's concurrency; with `fullHistory`, enough for every session to have it. */
  warmup: number;
  /** The window's length, unless `requests` is set. */
  durationMs: number;
  /** The window holds exactly this many requests. */
  requests?: number;
  /** Every session has `HISTORY_MESSAGES` messages of history when the window opens. */
  fullHistory: boolean;
  /** Also measured on the LLM alone, for what each target adds to it (Δ). */
  againstDirect: boolean;
};

/** The cells of a scenario, in the order they are measured. */
export function scenarioCells(scenario: SessionScenario, sizes: ScenarioSizes): ScenarioCell[] {
  const filled = (connections: number) => Math.max(sizes.warmup, connections * FILL_TURNS);
  switch (scenario) {
    case 'short-sessions':
      // 128 connections for throughput and the tail, 32 for the CPU a turn.
      return [128, 32].map((connections) => ({
        connections,
        stream: false,
        turnsPerSession: SHORT_SESSION_TURNS,
        warmup: sizes.warmup,
        durationMs: sizes.durationMs,
        requests: sizes.shortSessions * SHORT_SESSION_TURNS,
        fullHistory: false,
        againstDirect: false,
      }));
    case 'long-sessions':
      return [128, 1].map((connections) => ({ connections, stream: false, warmup: filled(connections), durationMs: sizes.durationMs, fullHistory: true, againstDirect: connections === 1 }));
    case 'streams':
      return [16, 1].map((connections) => ({
        connections,
        stream: true,
        chunks: STREAM_CHUNKS,
        warmup: filled(connections),
        durationMs: sizes.durationMs,
        fullHistory: true,
        againstDirect: connections === 1,
      }));
    case 'paced-streams':
      // All streams start at once when the window opens, as the tail is in their first bytes.
      return [{ connections: sizes.pacedStreams, stream: true, chunks: STREAM_CHUNKS, paceMs: PACE_MS, warmup: 0, durationMs: PACED_WINDOW_MS, fullHistory: false, againstDirect: true }];
  }
}

/**
 * The request bodies of a cell. A target that keeps the conversation (the floor, the service)
 * gets each new message alone with the system prompt; the LLM alone (`direct`) gets the
 * conversation such a target sends it: with a full history, `HISTORY_MESSAGES` messages before
 * the new one.
 */
export function scenarioBodies(cell: Pick<ScenarioCell, 'stream' | 'chunks' | 'paceMs' | 'fullHistory'>, direct: boolean): Buffer[] {
  const messages = cell.chunks === undefined ? [...USER_MESSAGES] : echoedMessages(cell.chunks, cell.paceMs);
  return conversationBodies(messages, { stream: cell.stream, history: direct && cell.fullHistory ? HISTORY_MESSAGES : 0 });
}

/**
 * The headers of each client's requests: the session it continues in `X-Session-ID`, named
 * `<prefix>-<client>-<n>`, the n-th session of the client; with `turnsPerSession`, a client
 * starts its next session after that many turns. Called once per request, in each client's order.
 */
export function sessionHeaders(prefix: string, turnsPerSession?: number): (worker: number) => Record<string, string> {
  const turns = new Map<number, number>();
  return (worker) => {
    const turn = turns.get(worker) ?? 0;
    turns.set(worker, turn + 1);
    const session = turnsPerSession === undefined ? 0 : Math.floor(turn / turnsPerSession);
    return { 'content-type': 'application/json', 'x-session-id': `${prefix}-${worker}-${session}` };
  };
}
