import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { StateGraph } from '../../machines/index.js';
import { SERVICE_MODELS } from '../operations/models-route.js';

/** The MCP tool that is the agent: named as /v1/models names the agent. */
export const AGENT_TOOL_NAME = SERVICE_MODELS[0];

/** The MCP server's name in its `initialize` answer. */
export const MCP_SERVER_NAME = SERVICE_MODELS[0];

/**
 * The agent as one MCP tool: a message in, the agent's reply out. Its description tells a host
 * what the agent does, from the descriptions of the graph's agent states, and that calls in one
 * MCP session continue one conversation.
 */
export function agentTool(graph: StateGraph): Tool {
  const agentStates = Object.values(graph.states).filter((state) => state.type === 'agent');
  const does = agentStates.map((state) => state.description.trim()).filter((text) => text !== '');
  return {
    name: AGENT_TOOL_NAME,
    title: 'Ask the agent',
    description: [
      `Sends a message to the ${AGENT_TOOL_NAME} agent and returns its reply.`,
      ...does.map((text) => (/[.!?]$/.test(text) ? text : `${text}.`)),
      'Calls in one MCP session continue one conversation: the agent remembers what was said before.',
    ].join(' '),
    inputSchema: {
      type: 'object',
      properties: { message: { type: 'string', minLength: 1, description: "The user's message to the agent." } },
      required: ['message'],
      additionalProperties: false,
    },
    annotations: { title: 'Ask the agent', readOnlyHint: false, openWorldHint: true },
  };
}

/** The message of a call's arguments, or why there is none (the text of the tool error a host shows). */
export function messageOf(args: Record<string, unknown> | undefined): { message: string } | { problem: string } {
  const message = args?.message;
  if (message === undefined) return { problem: `The argument 'message' is required: the text to send to the agent, e.g. {"message": "Hello"}.` };
  if (typeof message !== 'string') return { problem: `The argument 'message' must be a string, not ${message === null ? 'null' : typeof message}.` };
  if (message.trim() === '') return { problem: `The argument 'message' must not be empty.` };
  const unknown = Object.keys(args ?? {}).filter((key) => key !== 'message');
  if (unknown.length > 0) return { problem: `Unknown argument${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}. The tool takes 'message' only.` };
  return { message };
}
