/**
 * The stages of a turn whose durations the metrics keep (`turn_stage_duration_seconds`), in
 * the order a turn passes them; where a turn waits before its first byte is the sum of those
 * before `llm_first_byte`.
 * - `connection_wait`: a database query waiting for a connection of the pool (PGlite: for its
 *   one backend), once per query of any kind, the turns' and the rest.
 * - `session_wait`: the turn waiting for its session (the lock in this process, the lease across processes).
 * - `plan`: finding the session and planning the turn (the session row and recent turns, when not cached).
 * - `user_committed`: the user's message written and committed (group commit included).
 * - `prompt`: from that commit to the first LLM call (long-term memory recalled, the context built).
 * - `llm_first_byte`: from the turn's first LLM call to the first piece it streamed to the client.
 * - `llm_total`: one LLM call, from its start to its last piece.
 * - `reply_committed`: the turn's end written and committed.
 */
export const TURN_STAGES = ['connection_wait', 'session_wait', 'plan', 'user_committed', 'prompt', 'llm_first_byte', 'llm_total', 'reply_committed'] as const;

/** A stage of a turn (see `TURN_STAGES`). */
export type TurnStage = (typeof TURN_STAGES)[number];

/** Where the durations of turn stages go (`EventBus` fits). */
export type StageEvents = { emit(name: 'turn:stage', payload: { stage: Exclude<TurnStage, 'llm_total'>; durationMs: number }): void };

/** Runs `work` and tells `events` how long it took as `stage`, whether it resolved or rejected. */
export async function timedStage<T>(events: StageEvents, stage: Exclude<TurnStage, 'llm_total'>, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await work();
  } finally {
    events.emit('turn:stage', { stage, durationMs: performance.now() - started });
  }
}
