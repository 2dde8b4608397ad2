import type { Handoff, HandoffOption, StateApproval } from '../../machines/index.js';
import type { ToolCall, ToolDefinition } from '../chat-types.js';

/**
 * The built-in `transfer_to_<state>` tools an agent state offers, one per hand-off the model may
 * make, described by the target state's `description`. They take no arguments: any the model
 * adds are ignored.
 */
export function transferTools(handoffs: readonly HandoffOption[]): ToolDefinition[] {
  return handoffs.map(({ state, tool, description }) => ({
    type: 'function',
    function: {
      name: tool,
      description: `Hand the conversation over to ${state}: ${description}`,
      parameters: { type: 'object', properties: {}, additionalProperties: false },
    },
  }));
}

/** The hand-off a reply makes: its first call of an offered `transfer_to_` tool (it wins over the reply's other calls), if any. */
export function handoffIn(toolCalls: readonly ToolCall[], handoffs: readonly HandoffOption[]): Handoff | undefined {
  for (const call of toolCalls) {
    const option = call.type === 'function' ? handoffs.find((handoff) => handoff.tool === call.function.name) : undefined;
    if (option) return { state: option.state, call };
  }
  return undefined;
}

/** Whether a tool state's `require_approval` holds the calls of the tool offered as `name`. */
export function stateRequiresApproval(rule: StateApproval, name: string): boolean {
  return rule === true || (Array.isArray(rule) && rule.includes(name));
}
