import { readFileSync } from 'node:fs';
import type { AgentCard, AgentSkill, SecurityScheme } from '@a2a-js/sdk';
import { packageFile } from '../../config/package-files.js';
import type { StateGraph } from '../../machines/graph-schema.js';
import type { ToolDefinition } from '../../runtime/chat-types.js';
import { SERVICE_MODELS } from '../operations/models-route.js';

/** Where the agent card is served (the specification's well-known path). */
export const AGENT_CARD_PATH = '/.well-known/agent-card.json';

/** Where the JSON-RPC endpoint is mounted. */
export const A2A_PATH = '/a2a';

/** The name of the security scheme the card declares when API keys are configured. */
export const BEARER_SCHEME = 'bearer';

/** What the agent card is made from. */
export type AgentCardSource = {
  graph: StateGraph;
  /** The tools the agent may call now (they change as tool servers connect). */
  tools: () => ToolDefinition[];
  /** True when API keys are configured: the card then asks for one as a bearer token. */
  needsKey: boolean;
};

const PACKAGE = JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string; description: string };

/** The media type the agent reads and writes. */
const TEXT = 'text/plain';

/**
 * The agent card (`/.well-known/agent-card.json`): the agent under the model name it answers
 * to, described by the graph's agent states; its JSON-RPC endpoint at `baseUrl` for A2A 1.0
 * and, through the SDK's compatibility layer, 0.3; streaming; a skill per agent state and one
 * per tool; text in and out; a bearer scheme when API keys are configured.
 */
export function agentCardOf(source: AgentCardSource, baseUrl: string): AgentCard {
  const url = `${baseUrl}${A2A_PATH}`;
  const agents = Object.entries(source.graph.states).filter(([, state]) => state.type === 'agent');
  const securitySchemes: Record<string, SecurityScheme> = source.needsKey
    ? { [BEARER_SCHEME]: { scheme: { $case: 'httpAuthSecurityScheme', value: { description: 'An API key of the service (auth.api_keys), as a bearer token', scheme: 'Bearer', bearerFormat: '' } } } }
    : {};
  return {
    name: SERVICE_MODELS[0],
    description: [PACKAGE.description, ...agents.map(([name, state]) => `${name}: ${state.description}`)].join('\n'),
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
    ],
    provider: undefined,
    version: PACKAGE.version,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes,
    securityRequirements: source.needsKey ? [{ schemes: { [BEARER_SCHEME]: { list: [] } } }] : [],
    defaultInputModes: [TEXT],
    defaultOutputModes: [TEXT],
    skills: [...agents.map(([name, state]) => agentSkill(name, state.description)), ...source.tools().map(toolSkill)],
    signatures: [],
  };
}

function agentSkill(state: string, description: string): AgentSkill {
  return { id: state, name: state, description, tags: ['agent'], examples: [], inputModes: [TEXT], outputModes: [TEXT], securityRequirements: [] };
}

/** A tool the agent may call, as a skill: asking the agent for it in words has it call the tool. */
function toolSkill(tool: ToolDefinition): AgentSkill {
  const { name, description } = tool.type === 'function' ? tool.function : { name: 'tool', description: undefined };
  return { id: `tool:${name}`, name, description: description ?? `The tool ${name}`, tags: ['tool'], examples: [], inputModes: [TEXT], outputModes: [TEXT], securityRequirements: [] };
}
