import type { ChatMessage, ToolDefinition } from '../chat-types.js';
import { renderedText } from './token-estimate.js';

/**
 * Describes the tools in the system prompt for a server that parses no tool calls (vLLM without
 * `--enable-auto-tool-choice`, llama.cpp without `--jinja`, a model Ollama has no tool template
 * for), in the words of the Hermes and Qwen2.5 chat templates, which models of many families
 * were trained on: their signatures in `<tools>`, each call as JSON in `<tool_call>`. The
 * calls are then read out of the reply's text (see `ToolCallMarkupReader`).
 */
export function withToolsInPrompt(messages: readonly ChatMessage[], tools: readonly ToolDefinition[]): ChatMessage[] {
  const signatures = tools.map((tool) => JSON.stringify(tool)).join('\n');
  const instructions =
    '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
    `You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n${signatures}\n</tools>\n\n` +
    'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';
  const [first, ...rest] = messages;
  if (first?.role !== 'system') return [{ role: 'system', content: instructions }, ...messages];
  return [{ role: 'system', content: `${renderedText(first)}\n\n${instructions}` }, ...rest];
}
