/**
 * The span attribute names the traces use. GenAI ones follow the OpenTelemetry GenAI semantic
 * conventions v0.1.0 (open-telemetry/semantic-conventions-genai, the first release after they
 * left semantic-conventions at v1.41.0: docs/gen-ai/client-inference.md, gen-ai-agent-spans.md,
 * execute-tool.md); HTTP, server and error ones the stable conventions (semantic-conventions
 * v1.44.0). Kept here, not taken from `@opentelemetry/semantic-conventions`, which exports the
 * GenAI names only from its unstable entry point and is not a dependency.
 */
export const ATTR = {
  GEN_AI_OPERATION_NAME: 'gen_ai.operation.name',
  GEN_AI_PROVIDER_NAME: 'gen_ai.provider.name',
  GEN_AI_AGENT_NAME: 'gen_ai.agent.name',
  GEN_AI_CONVERSATION_ID: 'gen_ai.conversation.id',
  GEN_AI_REQUEST_MODEL: 'gen_ai.request.model',
  GEN_AI_REQUEST_TEMPERATURE: 'gen_ai.request.temperature',
  GEN_AI_REQUEST_MAX_TOKENS: 'gen_ai.request.max_tokens',
  GEN_AI_REQUEST_STREAM: 'gen_ai.request.stream',
  GEN_AI_RESPONSE_MODEL: 'gen_ai.response.model',
  GEN_AI_RESPONSE_ID: 'gen_ai.response.id',
  GEN_AI_RESPONSE_FINISH_REASONS: 'gen_ai.response.finish_reasons',
  GEN_AI_USAGE_INPUT_TOKENS: 'gen_ai.usage.input_tokens',
  GEN_AI_USAGE_OUTPUT_TOKENS: 'gen_ai.usage.output_tokens',
  GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 'gen_ai.usage.reasoning.output_tokens',
  GEN_AI_INPUT_MESSAGES: 'gen_ai.input.messages',
  GEN_AI_OUTPUT_MESSAGES: 'gen_ai.output.messages',
  GEN_AI_SYSTEM_INSTRUCTIONS: 'gen_ai.system_instructions',
  GEN_AI_TOOL_NAME: 'gen_ai.tool.name',
  GEN_AI_TOOL_CALL_ID: 'gen_ai.tool.call.id',
  GEN_AI_TOOL_TYPE: 'gen_ai.tool.type',
  GEN_AI_TOOL_CALL_ARGUMENTS: 'gen_ai.tool.call.arguments',
  GEN_AI_TOOL_CALL_RESULT: 'gen_ai.tool.call.result',
  ERROR_TYPE: 'error.type',
  SERVER_ADDRESS: 'server.address',
  SERVER_PORT: 'server.port',
  HTTP_REQUEST_METHOD: 'http.request.method',
  HTTP_ROUTE: 'http.route',
  HTTP_RESPONSE_STATUS_CODE: 'http.response.status_code',
  URL_PATH: 'url.path',
  SERVICE_NAME: 'service.name',
} as const;

/** `gen_ai.operation.name` values the service's spans use. */
export const GEN_AI_OPERATION = { CHAT: 'chat', INVOKE_AGENT: 'invoke_agent', EXECUTE_TOOL: 'execute_tool' } as const;

/**
 * `gen_ai.provider.name`: the LLM servers (vLLM, SGLang, Ollama, llama.cpp) are reached over
 * OpenAI's chat-completions API, and the convention names the provider as the client knows it
 * (an OpenAI client reports `openai` whatever serves its base URL).
 */
export const GEN_AI_PROVIDER = 'openai';
