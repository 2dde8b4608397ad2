import type { BudgetName } from '../../config/budget-schema.js';
import type { Usage } from '../chat-types.js';
import type { TurnStage } from './turn-stages.js';
import { EventEmitter } from 'node:events';

/** Everything the runtime reports; logs, metrics, webhooks and the inspector subscribe here. */
export type RuntimeEvents = {
  'session:created': { sessionId: string; userId: string };
  'session:state_changed': { sessionId: string; userId: string; from: string; to: string; reason: string };
  'session:deleted': { sessionId: string; userId: string };
  /** `usage`: the tokens the turn's LLM calls used, summed over their models. */
  'turn:completed': {
    sessionId: string;
    userId: string;
    durationMs: number;
    outcome: 'ok' | 'llm_error' | 'cancelled';
    usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  };
  /** A stage of a turn took `durationMs` (`llm_total` is told by `llm:reply` instead). */
  'turn:stage': { stage: Exclude<TurnStage, 'llm_total'>; durationMs: number };
  /** `model`: the model the call named; `usage`: as the LLM server reported it (null: it did not). */
  'llm:reply': { sessionId: string; durationMs: number; finishReason: string; toolCalls: number; model: string; usage: Usage | null };
  'llm:error': { sessionId: string; userId: string; durationMs: number; message: string };
  'tool:call': { sessionId: string; userId: string; tool: string; server: string; durationMs: number; outcome: 'ok' | 'error' };
  'memory:written': { sessionId: string; userId: string; entries: number; kind: 'conversation' | 'long_term' };
  'storage:error': { operation: string; error: Error; attempt: number; willRetry: boolean };
  /**
   * A user's request was refused (`request`: 429) or a turn's next LLM call not made (`llm_call`)
   * for a token budget; `resetsAt` in ms since the epoch (null for a turn's budget). `first`: the
   * first refusal of this user, budget and period in this process (a turn's budget: every one).
   */
  'budget:exceeded': {
    userId: string;
    sessionId: string | null;
    budget: BudgetName;
    limit: number;
    used: number;
    resetsAt: number | null;
    refused: 'request' | 'llm_call';
    first: boolean;
  };
  'oauth:connected': { userId: string; provider: string };
  'oauth:refreshed': { userId: string; provider: string; durationMs: number };
  /** revoked: the provider refused the refresh token (the row is gone, the user must reconnect). */
  'oauth:refresh_failed': { userId: string; provider: string; reason: 'revoked' | 'unavailable' | 'no_refresh_token'; message: string };
  /** A stored token could not be decrypted (token_key changed, or the row was altered). */
  'oauth:token_unreadable': { userId: string; provider: string; message: string };
  'oauth:disconnected': { userId: string; provider: string };
};

/** Name of a runtime event. */
export type RuntimeEventName = keyof RuntimeEvents;

/** The runtime's one typed event stream. */
export class EventBus {
  private readonly emitter = new EventEmitter();

  constructor() {
    this.emitter.setMaxListeners(100);
  }

  emit<Name extends RuntimeEventName>(name: Name, payload: RuntimeEvents[Name]): void {
    this.emitter.emit(name, payload);
  }

  /** Subscribes to one event; returns the function that unsubscribes. */
  on<Name extends RuntimeEventName>(name: Name, listener: (payload: RuntimeEvents[Name]) => void): () => void {
    this.emitter.on(name, listener);
    return () => this.emitter.off(name, listener);
  }
}
