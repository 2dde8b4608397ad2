import type { ChatRequestBody } from './messages.js';
import { lastUserText, TRANSFER_PREFIX, transferCallIds } from './messages.js';
import type { ToolCallsReply } from './reply-spec.js';

const TRANSFER_WORD = /\[\[transfer:([\w-]+)\]\]/;

/**
 * How the fake model routes when it is offered `transfer_to_<state>` tools and has not handed
 * over yet this turn: `[[transfer:NAME]]` in the last user message calls `transfer_to_NAME` if it
 * is offered; otherwise the first offered state whose name (underscores read as spaces) the
 * message mentions as a word. Undefined when it does not route.
 */
export function transferReply(body: ChatRequestBody): ToolCallsReply | undefined {
  const targets = offeredTransfers(body.tools);
  if (targets.length === 0 || transferCallIds(body.messages).size > 0) return undefined;
  const text = lastUserText(body.messages);
  const named = TRANSFER_WORD.exec(text)?.[1];
  const target = named !== undefined ? targets.find((name) => name === named) : targets.find((name) => mentions(text, name));
  return target === undefined ? undefined : { toolCalls: [{ name: `${TRANSFER_PREFIX}${target}`, arguments: {} }] };
}

function offeredTransfers(tools: unknown[] | undefined): string[] {
  return (tools ?? []).flatMap((tool) => {
    const name = (tool as { function?: { name?: unknown } } | null)?.function?.name;
    return typeof name === 'string' && name.startsWith(TRANSFER_PREFIX) ? [name.slice(TRANSFER_PREFIX.length)] : [];
  });
}

function mentions(text: string, state: string): boolean {
  const words = state.split('_').map((word) => word.replace(/[^\w-]/g, ''));
  return new RegExp(`\\b${words.join('[\\s_-]+')}\\b`, 'i').test(text);
}
