import { createHash } from 'node:crypto';
import type { ToolDefinition } from '../chat-types.js';
import type { McpTool } from './mcp-connection.js';

/** One tool as the LLM sees it, and where it lives. */
export type CatalogueEntry = {
  /** The name offered to the LLM: `<server>__<tool>`, sanitised to ^[a-zA-Z0-9_-]{1,64}$. */
  name: string;
  server: string;
  tool: McpTool;
};

const SEPARATOR = '__';
const MAX_NAME_LENGTH = 64;

/** The OpenAI function name for `tool` of `server`: `<server>__<tool>` with other characters as `_`, at most 64 long. */
export function exposedToolName(server: string, tool: string): string {
  const name = `${server}${SEPARATOR}${tool}`.replace(/[^a-zA-Z0-9_-]/g, '_');
  return name.length <= MAX_NAME_LENGTH ? name : `${name.slice(0, MAX_NAME_LENGTH - 9)}_${shortHash(`${server}/${tool}`)}`;
}

/** Every server's tools under unique exposed names, in server order then tool order. */
export function buildCatalogue(servers: Array<{ server: string; tools: McpTool[] }>): Map<string, CatalogueEntry> {
  const catalogue = new Map<string, CatalogueEntry>();
  for (const { server, tools } of servers) {
    for (const tool of tools) {
      // Tools that only run as tasks cannot be called with a plain tools/call.
      if (tool.execution?.taskSupport === 'required') continue;
      let name = exposedToolName(server, tool.name);
      if (catalogue.has(name)) name = `${name.slice(0, MAX_NAME_LENGTH - 9)}_${shortHash(`${server}/${tool.name}`)}`;
      catalogue.set(name, { name, server, tool });
    }
  }
  return catalogue;
}

/**
 * Whether `entry` is in a graph state's `tools` list: by exposed name, `<server>`,
 * `<server>__*` or `*`. An absent list means every tool.
 */
export function isAllowed(entry: CatalogueEntry, allowed: string[] | undefined): boolean {
  if (!allowed) return true;
  return allowed.some(
    (pattern) =>
      pattern === '*' ||
      pattern === entry.name ||
      pattern === entry.server ||
      pattern === `${entry.server}${SEPARATOR}*` ||
      pattern === `${entry.server}${SEPARATOR}${entry.tool.name}`,
  );
}

/** The OpenAI `tools` entry of a catalogued tool. */
export function toolDefinition(entry: CatalogueEntry): ToolDefinition {
  const description = entry.tool.description ?? entry.tool.title;
  return {
    type: 'function',
    function: {
      name: entry.name,
      ...(description ? { description } : {}),
      parameters: inputSchemaOf(entry.tool),
    },
  };
}

/** The system prompt section listing each tool's name, description and input schema; empty without tools. */
export function describeTools(entries: Iterable<CatalogueEntry>): string {
  const sections: string[] = [];
  for (const entry of entries) {
    const description = entry.tool.description ?? entry.tool.title ?? '(no description)';
    sections.push(`### ${entry.name}\n${description}\nInput schema: ${JSON.stringify(inputSchemaOf(entry.tool))}`);
  }
  if (sections.length === 0) return '';
  return [
    '## Tools',
    'You can call the following tools. Each is listed with its name, description and input schema (JSON Schema); call a tool by its name with arguments that match its schema.',
    ...sections,
  ].join('\n\n');
}

function inputSchemaOf(tool: McpTool): Record<string, unknown> {
  const { $schema: _ignored, ...schema } = tool.inputSchema as Record<string, unknown>;
  return { ...schema, type: 'object' };
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}
