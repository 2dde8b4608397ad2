/** The replay server's script: which model turn answers a request, and which requests fail instead. */
import type { ChatRequest, ModelTurn } from '../../fixtures/llm-servers/server-fixture.js';
import { endsWithToolResults, lastUserText } from './prompt-checks.js';

/** When a rule applies. */
export interface ReplayMatch {
  /** The last user message contains this text. */
  lastUserIncludes?: string;
  /** true: the prompt ends with tool results; false: it does not. */
  hasToolResults?: boolean;
}

/** One scripted answer. */
export interface ReplayRule {
  match?: ReplayMatch;
  turn: ModelTurn | ((request: ChatRequest) => ModelTurn);
  /** How many requests it answers; unlimited when absent. */
  times?: number;
}

/** A scripted failure of the next chat requests. */
export interface ReplayFailure {
  status: number;
  retryAfter?: string;
  /** How many requests fail this way; 1 when absent. */
  times?: number;
  /** The error message; the server's own wording for that status when absent. */
  message?: string;
}

interface Slot<T> {
  item: T;
  left: number;
}

function matches(match: ReplayMatch | undefined, request: ChatRequest): boolean {
  if (!match) return true;
  if (match.lastUserIncludes !== undefined && !lastUserText(request.messages).includes(match.lastUserIncludes)) return false;
  if (match.hasToolResults !== undefined && endsWithToolResults(request.messages) !== match.hasToolResults) return false;
  return true;
}

/** Rules and failures, consumed in order. */
export class ScriptBook {
  private rules: Slot<ReplayRule>[] = [];
  private failures: Slot<ReplayFailure>[] = [];

  /** Appends rules; earlier rules win. */
  addRules(rules: readonly ReplayRule[]): void {
    for (const rule of rules) this.rules.push({ item: rule, left: rule.times ?? Number.POSITIVE_INFINITY });
  }

  /** Queues failures for the next chat requests. */
  addFailures(failures: readonly ReplayFailure[]): void {
    for (const failure of failures) this.failures.push({ item: failure, left: failure.times ?? 1 });
  }

  /** Takes the next queued failure, if any. */
  takeFailure(): ReplayFailure | undefined {
    const slot = this.failures[0];
    if (!slot) return undefined;
    slot.left -= 1;
    if (slot.left <= 0) this.failures.shift();
    return slot.item;
  }

  /** The turn of the first matching rule with uses left, or the echo of the last user message. */
  takeTurn(request: ChatRequest): ModelTurn {
    const slot = this.rules.find((candidate) => candidate.left > 0 && matches(candidate.item.match, request));
    if (!slot) return { content: `Echo: ${lastUserText(request.messages)}` };
    slot.left -= 1;
    const turn = slot.item.turn;
    return typeof turn === 'function' ? turn(request) : turn;
  }

  /** Forgets every rule and failure. */
  clear(): void {
    this.rules = [];
    this.failures = [];
  }
}
