import type { ChatRequestBody } from './messages.js';
import { lastUserText, textOf, toolResultsAfterLastUser } from './messages.js';
import type { ReplySource, ReplySpec } from './reply-spec.js';
import { resolveReply } from './reply-spec.js';

/** When a rule applies; every given condition must hold, an empty match always holds. */
export type RuleMatch = {
  /** The last user message contains this text. */
  lastUserIncludes?: string;
  /** Tool results follow the last user message (true), or do not (false). */
  hasToolResults?: boolean;
  /** The request names this model. */
  model?: string;
  /** The system messages contain this text (an agent state's prompt, say). */
  systemIncludes?: string;
};

/** One scripted answer: the first rule that matches and has uses left answers. */
export type ScriptRule = {
  match?: RuleMatch;
  reply: ReplySource;
  /** How many requests the rule answers before it is used up; unlimited when absent. */
  times?: number;
};

/** The ordered rules of a fake LLM, used up as they answer. */
export type Script = {
  add(rules: ScriptRule[]): void;
  /** The reply of the first matching rule with uses left (using one of them), or undefined. */
  take(request: ChatRequestBody): ReplySpec | undefined;
  /** How many rules still have uses left. */
  pending(): number;
  clear(): void;
};

type LiveRule = { rule: ScriptRule; remaining: number };

/** Creates an empty script. */
export function createScript(): Script {
  let rules: LiveRule[] = [];
  return {
    add(added) {
      rules.push(...added.map(liveRule));
    },
    take(request) {
      const live = rules.find((candidate) => candidate.remaining > 0 && matches(candidate.rule.match, request));
      if (live === undefined) return undefined;
      live.remaining -= 1;
      return resolveReply(live.rule.reply, request);
    },
    pending: () => rules.filter((live) => live.remaining > 0).length,
    clear() {
      rules = [];
    },
  };
}

function liveRule(rule: ScriptRule): LiveRule {
  const { times } = rule;
  if (times !== undefined && !(Number.isInteger(times) && times > 0)) {
    throw new RangeError(`fake LLM rule: times must be a positive integer, got ${String(times)}`);
  }
  return { rule, remaining: times ?? Number.POSITIVE_INFINITY };
}

/** Whether a request meets every condition of a match. */
export function matches(match: RuleMatch | undefined, request: ChatRequestBody): boolean {
  if (match === undefined) return true;
  const { lastUserIncludes, hasToolResults, model, systemIncludes } = match;
  if (systemIncludes !== undefined && !systemText(request.messages).includes(systemIncludes)) return false;
  if (lastUserIncludes !== undefined && !lastUserText(request.messages).includes(lastUserIncludes)) return false;
  if (hasToolResults !== undefined && hasToolResults !== toolResultsAfterLastUser(request.messages).length > 0) {
    return false;
  }
  return model === undefined || request.model === model;
}

function systemText(messages: ChatRequestBody['messages']): string {
  return messages
    .filter((message) => message.role === 'system')
    .map((message) => textOf(message.content))
    .join('\n');
}
