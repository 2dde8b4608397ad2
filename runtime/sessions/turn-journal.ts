import { createHash } from 'node:crypto';
import type { ChatMessage, GenerationParams, ToolCall } from '../chat-types.js';
import type { LlmReply } from '../llm/llm-client.js';
import type { ToolCallResult } from '../tools/tool-runner.js';
import { TURN_SETTINGS_STEP } from '../ports.js';
import type { Turn } from './conversation-history.js';

/** How a turn's steps are written: through the session's durable writes, in one statement, waited for until they commit. */
export type StepWrite = (steps: ReadonlyArray<readonly [step: string, body: string]>) => Promise<void>;

/**
 * What a process needs to finish a turn it finds abandoned (its process died, and no request
 * came to finish it): the model settings and the system messages its client sent. Stored with
 * the turn's first step; a turn with its own way to be finished (`TurnRequest.hasOwnResume`) has none.
 */
export type TurnSettings = { params: GenerationParams; system: ChatMessage[] };

/**
 * The steps of one turn as they complete, stored so that a turn whose process died is
 * continued from its last stored step instead of from its start: each LLM round that makes
 * calls, stored before they run (so a call of a stored round may have started), and each call's
 * result. A turn run again from the same messages (a retry, a taken-over background response)
 * finds them: a stored round is not asked of the model again, a stored result is not run again.
 * A round that makes no calls (the one that ends a turn) is not stored: it has no effect a
 * second asking could repeat, and the turn's end stores its text.
 */
export class TurnJournal {
  /** Whether the turn stored or found a step: its steps are dropped once it is answered. */
  private touched: boolean;
  /** The rounds an earlier attempt stored, by index. */
  private readonly rounds = new Map<number, LlmReply>();
  /** The results an earlier attempt stored, by call id. */
  private readonly results = new Map<string, ToolCallResult>();
  /** The calls of the rounds found stored: an earlier attempt may have started them. */
  private readonly startedCalls = new Set<string>();

  /** The turn's settings, still to be stored with its first step (none: stored already, or not to be). */
  private unstoredSettings: string | undefined;

  /**
   * `stored`: the steps an earlier attempt stored, by name, as `TurnStepStore.load` gives them;
   * `settings`: stored with the turn's first step, unless an earlier attempt stored them.
   */
  constructor(
    stored: ReadonlyMap<string, string>,
    private readonly write: StepWrite,
    settings?: TurnSettings,
  ) {
    this.touched = stored.size > 0;
    this.unstoredSettings = settings && !stored.has(SETTINGS) ? JSON.stringify(settings) : undefined;
    for (const [step, body] of stored) {
      if (step.startsWith(RESULT)) {
        this.results.set(step.slice(RESULT.length), JSON.parse(body) as ToolCallResult);
      } else if (step.startsWith(ROUND)) {
        const reply = JSON.parse(body) as LlmReply;
        this.rounds.set(Number(step.slice(ROUND.length)), reply);
        for (const call of reply.toolCalls) this.startedCalls.add(call.id);
      }
    }
  }

  /** The settings stored with a turn's steps, if any. */
  static settingsOf(stored: ReadonlyMap<string, string>): TurnSettings | undefined {
    const body = stored.get(SETTINGS);
    return body === undefined ? undefined : (JSON.parse(body) as TurnSettings);
  }

  /** How many times the turn was taken over by a process that found it abandoned. */
  static takeoversOf(stored: ReadonlyMap<string, string>): number {
    return [...stored.keys()].filter((step) => step.startsWith(TAKEOVER)).length;
  }

  /** The step that records the turn's `count`th takeover. */
  static takeoverStep(count: number): readonly [string, string] {
    return [`${TAKEOVER}${count}`, ''];
  }

  /** The name of a turn's steps: the history it continues and its new messages. */
  static anchorOf(baseHash: string, turns: readonly Turn[]): string {
    const hash = createHash('sha256').update(baseHash);
    for (const turn of turns) hash.update('\u0000').update(turn.role).update('\u0000').update(turn.content);
    return hash.digest('hex');
  }

  get isUsed(): boolean {
    return this.touched;
  }

  /** The reply of the turn's LLM round `index` (0 first), when an earlier attempt stored it. */
  round(index: number): LlmReply | undefined {
    return this.rounds.get(index);
  }

  /** Stores round `index`'s reply, before its calls run. */
  async recordRound(index: number, reply: LlmReply): Promise<void> {
    await this.store(`${ROUND}${index}`, JSON.stringify(reply));
  }

  /** The result of a call an earlier attempt finished. */
  result(call: ToolCall): ToolCallResult | undefined {
    return this.results.get(call.id);
  }

  /** Whether an earlier attempt may have started the call and stored no result: it may or may not have run. */
  mayHaveStarted(call: ToolCall): boolean {
    return this.startedCalls.has(call.id) && !this.results.has(call.id);
  }

  /** Stores a call's result as soon as it has one. */
  async recordResult(call: ToolCall, result: ToolCallResult): Promise<void> {
    await this.store(`${RESULT}${call.id}`, JSON.stringify(result));
  }

  /** Stores a step, with the turn's settings if it is the turn's first. */
  private async store(step: string, body: string): Promise<void> {
    this.touched = true;
    const settings = this.unstoredSettings;
    await this.write(settings === undefined ? [[step, body]] : [[SETTINGS, settings], [step, body]]);
    this.unstoredSettings = undefined;
  }
}

/** Steps are named `round:<index>`, `result:<call id>`, `settings` and `takeover:<count>`. */
const ROUND = 'round:';
const RESULT = 'result:';
const SETTINGS = TURN_SETTINGS_STEP;
const TAKEOVER = 'takeover:';
