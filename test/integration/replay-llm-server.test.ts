import { expect } from 'chai';
import { SERVER_FIXTURES, type ServerName } from '../fixtures/llm-servers/index.js';
import type { ModelTurn } from '../fixtures/llm-servers/server-fixture.js';
import { startReplayLlm, type ReplayLlm, type ReplayLlmOptions } from '../support/replay-llm-server.js';

const QUESTION = [{ role: 'user', content: 'What is 2+2?' }];
/** 4 per message + ceil(12 chars / 4). */
const QUESTION_TOKENS = 7;
/** ceil(len("Echo: What is 2+2?") / 4), the default turn's completion tokens. */
const ECHO_TOKENS = 5;
const THINKING: ModelTurn = { reasoning: 'Add them.', content: '2 + 2 = 4.' };
/** ceil(len("<think>\nAdd them.\n</think>\n\n2 + 2 = 4.") / 4) */
const THINKING_TOKENS = Math.ceil('<think>\nAdd them.\n</think>\n\n2 + 2 = 4.'.length / 4);
const WEATHER_TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const TWO_CALLS: ModelTurn = {
  toolCalls: [
    { name: 'get_weather', arguments: { city: 'Paris' } },
    { name: 'get_time', arguments: { tz: 'Europe/Paris' } },
  ],
};

interface Sse {
  status: number;
  contentType: string | null;
  raw: string;
  frames: string[];
}

async function post(llm: ReplayLlm, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${llm.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

async function stream(llm: ReplayLlm, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Sse> {
  const response = await post(llm, { ...body, stream: true }, headers);
  const raw = await response.text();
  const frames = raw.split('\n\n').filter((block) => block !== '').map((block) => {
    expect(block.startsWith('data: '), `SSE block ${JSON.stringify(block)}`).to.equal(true);
    return block.slice('data: '.length);
  });
  return { status: response.status, contentType: response.headers.get('content-type'), raw, frames };
}

/** A response body as JSON; loosely typed because tests probe arbitrary shapes. */
async function readJson(response: Response | Promise<Response>): Promise<any> {
  return (await response).json();
}

function json(frame: string): any {
  return JSON.parse(frame);
}

/** The concatenated `field` of every delta, to check that pieces add up. */
function joined(frames: string[], pick: (delta: Record<string, unknown>) => unknown): string {
  return frames.filter((frame) => frame !== '[DONE]').flatMap((frame) => json(frame).choices ?? []).map((choice: { delta: Record<string, unknown> }) => pick(choice.delta) ?? '').join('');
}

function argumentsOf(frames: string[], index: number): string {
  return joined(frames, (delta) => (delta.tool_calls as Array<{ index: number; function?: { arguments?: string | null } }> | undefined)?.filter((call) => call.index === index).map((call) => call.function?.arguments ?? '').join(''));
}

function withReplay(options: ReplayLlmOptions, body: (get: () => ReplayLlm) => void): void {
  let llm: ReplayLlm;
  beforeEach(async () => {
    llm = await startReplayLlm(options);
  });
  afterEach(async () => {
    await llm?.close();
  });
  body(() => llm);
}

describe('replay LLM server', () => {
  describe('fixtures', () => {
    for (const [name, fixture] of Object.entries(SERVER_FIXTURES)) {
      it(`${name} cites a source for its shapes`, () => {
        expect(fixture.name).to.equal(name);
        expect(fixture.sources.length).to.be.greaterThan(3);
        for (const source of fixture.sources) {
          expect(source.repo, JSON.stringify(source)).to.be.a('string').and.not.equal('');
          expect(source.path, JSON.stringify(source)).to.not.equal('');
          expect(source.commit, JSON.stringify(source)).to.not.equal('');
          expect(source.what, JSON.stringify(source)).to.not.equal('');
        }
      });
    }
  });

  describe('vllm', () => {
    withReplay({ server: 'vllm' }, (llm) => {
      it('streams role, reasoning, content and finish chunks in the ≥ 0.16 shape', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { model: 'whatever', messages: QUESTION });
        expect(sse.status).to.equal(200);
        expect(sse.contentType).to.equal('text/event-stream; charset=utf-8');
        const { id, created } = json(sse.frames[0]!);
        expect(id).to.match(/^chatcmpl-[0-9a-f]{16}$/);
        const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"Qwen/Qwen3-8B"`;
        expect(sse.frames).to.deep.equal([
          `${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning":"\\nAdd"},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning":" the"},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning":"m.\\n"},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":"\\n\\n2 "},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":"+ 2 "},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":"= 4."},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}`,
          '[DONE]',
        ]);
      });

      it('adds a choices:[] usage chunk, total_tokens before completion_tokens, only with include_usage', async () => {
        llm().script({ turn: THINKING, times: 2 });
        const plain = await stream(llm(), { messages: QUESTION, stream_options: {} });
        expect(plain.raw).to.not.include('usage');
        const sse = await stream(llm(), { messages: QUESTION, stream_options: { include_usage: true } });
        const { id, created } = json(sse.frames[0]!);
        expect(sse.frames.at(-2)).to.equal(`{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":${QUESTION_TOKENS},"total_tokens":${QUESTION_TOKENS + THINKING_TOKENS},"completion_tokens":${THINKING_TOKENS}}}`);
        expect(sse.frames.at(-1)).to.equal('[DONE]');
      });

      it('streams hermes tool calls as a header delta then raw argument text, with chatcmpl-tool ids', async () => {
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { messages: QUESTION, tools: WEATHER_TOOLS });
        const headers = sse.frames.filter((frame) => frame.includes('"name"')).map((frame) => json(frame).choices[0].delta.tool_calls[0]);
        expect(headers).to.have.length(2);
        expect(headers[0].id).to.match(/^chatcmpl-tool-[0-9a-f]{16}$/);
        expect(JSON.stringify(headers[0])).to.equal(`{"id":"${headers[0].id}","type":"function","index":0,"function":{"name":"get_weather"}}`);
        expect(JSON.stringify(headers[1])).to.equal(`{"id":"${headers[1].id}","type":"function","index":1,"function":{"name":"get_time"}}`);
        expect(sse.frames[2]).to.include('"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"ci"}}]}');
        expect(argumentsOf(sse.frames, 0)).to.equal('{"city": "Paris"}');
        expect(argumentsOf(sse.frames, 1)).to.equal('{"tz": "Europe/Paris"}');
        expect(json(sse.frames.at(-2)!).choices[0]).to.deep.equal({ index: 0, delta: { content: '' }, logprobs: null, finish_reason: 'tool_calls', stop_reason: null, token_ids: null });
      });

      it('answers non-streamed with the full model_dump, nulls and usage included', async () => {
        llm().script({ turn: THINKING });
        const response = await post(llm(), { messages: QUESTION });
        const text = await response.text();
        const { id, created } = JSON.parse(text);
        expect(text).to.equal(`{"id":"${id}","object":"chat.completion","created":${created},"model":"Qwen/Qwen3-8B","choices":[{"index":0,"message":{"role":"assistant","content":"\\n\\n2 + 2 = 4.","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning":"\\nAdd them.\\n"},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":${QUESTION_TOKENS},"total_tokens":${QUESTION_TOKENS + THINKING_TOKENS},"completion_tokens":${THINKING_TOKENS},"prompt_tokens_details":null},"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":null}`);
      });

      it('puts tool calls with json.dumps arguments and null content in the non-streamed message', async () => {
        llm().script({ turn: TWO_CALLS });
        const body = await readJson(post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(body.choices[0].finish_reason).to.equal('tool_calls');
        expect(body.choices[0].message.content).to.equal(null);
        expect(body.choices[0].message.tool_calls[0]).to.deep.equal({ id: body.choices[0].message.tool_calls[0].id, type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } });
      });

      it('refuses an over-long prompt with the renderer-era message, as JSON even for stream:true', async () => {
        llm().setup({ contextWindow: 100 });
        const response = await post(llm(), { messages: [{ role: 'user', content: 'x'.repeat(400) }], max_tokens: 16, stream: true });
        expect(response.status).to.equal(400);
        expect(response.headers.get('content-type')).to.equal('application/json');
        expect(await response.text()).to.equal('{"error":{"message":"This model\'s maximum context length is 100 tokens. However, you requested 16 output tokens and your prompt contains at least 85 input tokens, for a total of at least 101 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=85)","type":"BadRequestError","param":"input_tokens","code":400}}');
      });

      it('answers tools on a server without a tool parser with its 400', async () => {
        llm().setup({ toolCallParser: false });
        const response = await post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS });
        expect(response.status).to.equal(400);
        expect(await response.text()).to.equal('{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}');
      });

      it('leaves hermes markup in content when tool_choice is "none"', async () => {
        llm().setup({ toolCallParser: false });
        llm().script({ turn: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] } });
        const body = await readJson(post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS, tool_choice: 'none' }));
        expect(body.choices[0].message.content).to.equal('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
        expect(body.choices[0].finish_reason).to.equal('stop');
      });

      it('sends a template error as 400 BadRequestError when roles do not alternate', async () => {
        llm().setup({ requireAlternation: true });
        const response = await post(llm(), { messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] });
        expect(response.status).to.equal(400);
        expect(await response.text()).to.equal('{"error":{"message":"Conversation roles must alternate user/assistant/user/assistant/...","type":"BadRequestError","param":null,"code":400}}');
      });

      it('keeps <think> inline and split across chunks without a reasoning parser', async () => {
        llm().setup({ reasoningParser: false });
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { messages: QUESTION });
        expect(json(sse.frames[1]!).choices[0].delta).to.deep.equal({ content: '<thi' });
        expect(joined(sse.frames, (delta) => delta.content)).to.equal('<think>\nAdd them.\n</think>\n\n2 + 2 = 4.');
        expect(sse.raw).to.not.include('"reasoning"');
      });

      it('carries the last piece on a length finish chunk and keeps an unclosed think block as reasoning', async () => {
        llm().script({ turn: { reasoning: 'Still thinking', finish: 'length' }, times: 2 });
        const sse = await stream(llm(), { messages: QUESTION });
        expect(json(sse.frames.at(-2)!).choices[0]).to.deep.equal({ index: 0, delta: { reasoning: 'ing' }, logprobs: null, finish_reason: 'length', stop_reason: null, token_ids: null });
        const body = await readJson(post(llm(), { messages: QUESTION }));
        expect(body.choices[0].message).to.include({ content: null, reasoning: '\nStill thinking' });
        expect(body.choices[0].finish_reason).to.equal('length');
      });

      it('shows only "…</think>" when the template opened <think>, split or inline', async () => {
        llm().setup({ thinkOpensInPrompt: true });
        llm().script({ turn: THINKING, times: 2 });
        const parsed = await readJson(post(llm(), { messages: QUESTION }));
        expect(parsed.choices[0].message).to.include({ reasoning: 'Add them.\n', content: '\n\n2 + 2 = 4.' });
        llm().setup({ reasoningParser: false });
        const inline = await readJson(post(llm(), { messages: QUESTION }));
        expect(inline.choices[0].message).to.include({ reasoning: null, content: 'Add them.\n</think>\n\n2 + 2 = 4.' });
      });

      it('uses X-Request-Id after chatcmpl-', async () => {
        const sse = await stream(llm(), { messages: QUESTION }, { 'x-request-id': 'trace-42' });
        expect(json(sse.frames[0]!).id).to.equal('chatcmpl-trace-42');
      });

      it('lists the model with max_model_len and permissions', async () => {
        llm().setup({ contextWindow: 8192 });
        const body = await readJson(fetch(`${llm().url}/models`));
        expect(body.object).to.equal('list');
        expect(Object.keys(body.data[0])).to.deep.equal(['id', 'object', 'created', 'owned_by', 'root', 'parent', 'max_model_len', 'permission']);
        expect(body.data[0]).to.include({ id: 'Qwen/Qwen3-8B', owned_by: 'vllm', root: 'Qwen/Qwen3-8B', parent: null, max_model_len: 8192 });
        expect(body.data[0].permission[0].object).to.equal('model_permission');
      });

      it('tokenizes a prompt or messages at the root /tokenize only', async () => {
        const prompt = await (await fetch(`${llm().origin}/tokenize`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello world!' }) })).text();
        const parsed = JSON.parse(prompt);
        expect(prompt).to.equal(`{"count":3,"max_model_len":4096,"tokens":${JSON.stringify(parsed.tokens)},"token_strs":null}`);
        expect(parsed.tokens).to.have.length(3);
        const chat = await readJson(fetch(`${llm().origin}/tokenize`, { method: 'POST', body: JSON.stringify({ messages: QUESTION }) }));
        expect(chat.count).to.equal(QUESTION_TOKENS);
        expect((await fetch(`${llm().url}/tokenize`, { method: 'POST', body: '{}' })).status).to.equal(404);
      });

      it('fails scripted requests in the nested error shape with Retry-After', async () => {
        llm().fail({ status: 503, retryAfter: '2' });
        const failed = await post(llm(), { messages: QUESTION });
        expect(failed.status).to.equal(503);
        expect(failed.headers.get('retry-after')).to.equal('2');
        expect(await readJson(failed)).to.deep.equal({ error: { message: 'Service Unavailable', type: 'Service Unavailable', param: null, code: 503 } });
        expect((await post(llm(), { messages: QUESTION })).status).to.equal(200);
      });
    });
  });

  describe('vllm-0.13', () => {
    withReplay({ server: 'vllm-0.13' }, (llm) => {
      it('carries reasoning_content on every delta, null beside role and content', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { messages: QUESTION });
        const deltas = sse.frames.slice(0, -1).map((frame) => JSON.stringify(json(frame).choices[0].delta));
        expect(json(sse.frames[0]!).id).to.match(/^chatcmpl-[0-9a-f]{16}$/);
        expect(deltas[0]).to.equal('{"role":"assistant","content":"","reasoning_content":null}');
        expect(deltas[1]).to.equal('{"reasoning":"\\nAdd","reasoning_content":"\\nAdd"}');
        expect(deltas[4]).to.equal('{"content":"\\n\\n2 ","reasoning_content":null}');
        expect(deltas.at(-1)).to.equal('{"content":"","reasoning_content":null}');
        expect(sse.frames[0]).to.match(/"prompt_token_ids":null}$/);
      });

      it('puts reasoning and reasoning_content in the message', async () => {
        llm().script({ turn: THINKING });
        const body = await readJson(post(llm(), { messages: QUESTION }));
        expect(Object.keys(body.choices[0].message)).to.deep.equal(['role', 'content', 'refusal', 'annotations', 'audio', 'function_call', 'tool_calls', 'reasoning', 'reasoning_content']);
        expect(body.choices[0].message.reasoning_content).to.equal('\nAdd them.\n');
      });

      it('includes usage for stream_options:{} (include_usage defaulted to True)', async () => {
        const sse = await stream(llm(), { messages: QUESTION, stream_options: {} });
        expect(json(sse.frames.at(-2)!).usage).to.deep.equal({ prompt_tokens: QUESTION_TOKENS, total_tokens: QUESTION_TOKENS + ECHO_TOKENS, completion_tokens: ECHO_TOKENS });
      });

      it('refuses max_tokens beyond the window with the v0.11–v0.15 message', async () => {
        const response = await post(llm(), { messages: QUESTION, max_tokens: 4095 });
        expect(response.status).to.equal(400);
        expect(await response.text()).to.equal(`{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 4095. This model's maximum context length is 4096 tokens and your request has ${QUESTION_TOKENS} input tokens (4095 > 4096 - ${QUESTION_TOKENS}). (parameter=max_tokens, value=4095)","type":"BadRequestError","param":"max_tokens","code":400}}`);
      });
    });
  });

  describe('vllm-0.10', () => {
    withReplay({ server: 'vllm-0.10' }, (llm) => {
      it('streams reasoning_content only, 32-hex ids and no token-id keys', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { messages: QUESTION });
        const { id, created } = json(sse.frames[0]!);
        expect(id).to.match(/^chatcmpl-[0-9a-f]{32}$/);
        const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"Qwen/Qwen3-8B"`;
        expect(sse.frames[0]).to.equal(`${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`);
        expect(sse.frames[1]).to.equal(`${head},"choices":[{"index":0,"delta":{"reasoning_content":"\\nAdd"},"logprobs":null,"finish_reason":null}]}`);
        expect(sse.frames.at(-2)).to.equal(`${head},"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`);
        expect(sse.raw).to.not.include('token_ids');
      });

      it('orders the message role, reasoning_content, content, tool_calls', async () => {
        llm().script({ turn: THINKING });
        const body = await readJson(post(llm(), { messages: QUESTION }));
        expect(Object.keys(body.choices[0].message)).to.deep.equal(['role', 'reasoning_content', 'content', 'tool_calls']);
        expect(Object.keys(body)).to.deep.equal(['id', 'object', 'created', 'model', 'choices', 'usage', 'prompt_logprobs', 'kv_transfer_params']);
      });

      it('refuses an over-long prompt with the flat legacy body ending in " None"', async () => {
        const response = await post(llm(), { messages: QUESTION, max_tokens: 4095 });
        expect(response.status).to.equal(400);
        expect(await response.text()).to.equal(`{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested ${4095 + QUESTION_TOKENS} tokens (${QUESTION_TOKENS} in the messages, 4095 in the completion). Please reduce the length of the messages or completion. None","type":"BadRequestError","param":null,"code":400}`);
      });

      it('prints a template error twice (f"{e} {e.__cause__}")', async () => {
        llm().setup({ requireAlternation: true });
        const body = await readJson(post(llm(), { messages: [{ role: 'assistant', content: 'hi' }] }));
        expect(body).to.deep.equal({ object: 'error', message: 'Conversation roles must alternate user/assistant/user/assistant/... Conversation roles must alternate user/assistant/user/assistant/...', type: 'BadRequestError', param: null, code: 400 });
      });
    });
  });

  describe('sglang', () => {
    withReplay({ server: 'sglang' }, (llm) => {
      it('streams msgspec chunks: reasoning_content always present, matched_stop on every choice', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { model: 'qwen3', messages: QUESTION });
        const { id, created } = json(sse.frames[0]!);
        expect(id).to.match(/^[0-9a-f]{32}$/);
        const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"qwen3"`;
        expect(sse.frames).to.deep.equal([
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":"\\nAdd"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":" the"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":"m.\\n"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"\\n\\n2 "},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"+ 2 "},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"= 4."},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"reasoning_content":null},"logprobs":null,"finish_reason":"stop","matched_stop":151645}]}`,
          '[DONE]',
        ]);
      });

      it('sends the pydantic usage chunk with choices:[] only with include_usage', async () => {
        const sse = await stream(llm(), { messages: QUESTION, stream_options: { include_usage: true } });
        const { id, created } = json(sse.frames[0]!);
        expect(sse.frames.at(-2)).to.equal(`{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"default","choices":[],"usage":{"prompt_tokens":${QUESTION_TOKENS},"total_tokens":${QUESTION_TOKENS + ECHO_TOKENS},"completion_tokens":${ECHO_TOKENS},"prompt_tokens_details":null,"reasoning_tokens":0}}`);
      });

      it('streams tool calls as pydantic chunks: name with "" first, then id:null,name:null json.dumps pieces', async () => {
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { model: 'qwen3', messages: QUESTION, tools: WEATHER_TOOLS });
        const first = json(sse.frames[1]!);
        const callId = first.choices[0].delta.tool_calls[0].id;
        expect(callId).to.match(/^call_[0-9a-f]{24}$/);
        expect(sse.frames[1]).to.equal(`{"id":"${first.id}","object":"chat.completion.chunk","created":${first.created},"model":"qwen3","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":[{"id":"${callId}","index":0,"type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`);
        expect(JSON.stringify(json(sse.frames[2]!).choices[0].delta.tool_calls[0])).to.equal('{"id":null,"index":0,"type":"function","function":{"name":null,"arguments":"{\\"ci"}}');
        expect(argumentsOf(sse.frames, 0)).to.equal('{"city": "Paris"}');
        expect(argumentsOf(sse.frames, 1)).to.equal('{"tz": "Europe/Paris"}');
        expect(json(sse.frames.at(-2)!).choices[0]).to.deep.equal({ index: 0, delta: { reasoning_content: null }, logprobs: null, finish_reason: 'tool_calls', matched_stop: 151645 });
      });

      it('ASCII-escapes streamed argument diffs but not the non-streamed arguments', async () => {
        llm().script({ turn: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Zürich' } }] }, times: 2 });
        const sse = await stream(llm(), { messages: QUESTION, tools: WEATHER_TOOLS });
        expect(argumentsOf(sse.frames, 0)).to.equal('{"city": "Z\\u00fcrich"}');
        const body = await readJson(post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(body.choices[0].message.tool_calls[0].function.arguments).to.equal('{"city": "Zürich"}');
      });

      it('answers non-streamed with null reasoning_content/tool_calls, matched_stop and metadata', async () => {
        const text = await (await post(llm(), { model: 'qwen3', messages: QUESTION })).text();
        const { id, created } = JSON.parse(text);
        expect(text).to.equal(`{"id":"${id}","object":"chat.completion","created":${created},"model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","content":"Echo: What is 2+2?","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":151645}],"usage":{"prompt_tokens":${QUESTION_TOKENS},"total_tokens":${QUESTION_TOKENS + ECHO_TOKENS},"completion_tokens":${ECHO_TOKENS},"prompt_tokens_details":null,"reasoning_tokens":0},"metadata":{"weight_version":"default"}}`);
      });

      it('gives non-streamed tool calls index -1 and clears matched_stop', async () => {
        llm().script({ turn: TWO_CALLS });
        const body = await readJson(post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(body.choices[0]).to.include({ finish_reason: 'tool_calls', matched_stop: null });
        expect(body.choices[0].message.tool_calls.map((call: { index: number }) => call.index)).to.deep.equal([-1, -1]);
        expect(body.choices[0].message.tool_calls[1].function).to.deep.equal({ name: 'get_time', arguments: '{"tz": "Europe/Paris"}' });
      });

      it('leaves tool markup in content with finish "stop" when started without a tool parser', async () => {
        llm().setup({ toolCallParser: false });
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { messages: QUESTION, tools: WEATHER_TOOLS });
        expect(sse.status).to.equal(200);
        expect(joined(sse.frames, (delta) => delta.content)).to.equal('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>');
        expect(sse.raw).to.not.include('"tool_calls"');
        expect(json(sse.frames.at(-2)!).choices[0].finish_reason).to.equal('stop');
      });

      it('refuses long input and input + max_tokens with its two flat messages, also for stream:true', async () => {
        llm().setup({ contextWindow: 20 });
        const long = await post(llm(), { messages: [{ role: 'user', content: 'x'.repeat(80) }], stream: true });
        expect(long.status).to.equal(400);
        expect(await long.text()).to.equal('{"object":"error","message":"The input (24 tokens) is longer than the model\'s context length (20 tokens).","type":"BadRequestError","param":null,"code":400}');
        const total = await readJson(post(llm(), { messages: QUESTION, max_tokens: 16 }));
        expect(total.message).to.equal(`Requested token count exceeds the model's maximum context length of 20 tokens. You requested a total of ${QUESTION_TOKENS + 16} tokens: ${QUESTION_TOKENS} tokens from the input messages and 16 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`);
        const legacy = SERVER_FIXTURES.sglang.contextLengthError(24, 20, undefined)!.legacyInStream!;
        expect(legacy.frames).to.deep.equal(['{"error": {"object": "error", "message": "The input (24 tokens) is longer than the model\'s context length (20 tokens).", "type": "BadRequestError", "param": null, "code": 400}}', '[DONE]']);
      });

      it('reports the tokenizer max length, not the server context, from /tokenize and /v1/tokenize', async () => {
        for (const path of ['/tokenize', '/v1/tokenize']) {
          const text = await (await fetch(`${llm().origin}${path}`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello world!' }) })).text();
          expect(text).to.equal(`{"tokens":${JSON.stringify(JSON.parse(text).tokens)},"count":3,"max_model_len":131072}`);
        }
      });

      it('lists the model with owned_by sglang and max_model_len', async () => {
        const body = await readJson(fetch(`${llm().url}/models`));
        expect(body.data[0]).to.deep.equal({ id: 'Qwen/Qwen3-8B', object: 'model', created: body.data[0].created, owned_by: 'sglang', root: 'Qwen/Qwen3-8B', parent: null, max_model_len: 4096 });
      });

      it('answers a template error with the flat 400', async () => {
        llm().setup({ requireAlternation: true });
        const response = await post(llm(), { messages: [{ role: 'system', content: 'a' }, { role: 'system', content: 'b' }, { role: 'user', content: 'c' }] });
        expect(response.status).to.equal(400);
        expect(await readJson(response)).to.deep.equal({ object: 'error', message: 'Conversation roles must alternate user/assistant/user/assistant/...', type: 'BadRequestError', param: null, code: 400 });
      });
    });
  });

  describe('ollama', () => {
    withReplay({ server: 'ollama' }, (llm) => {
      it('streams role once, content on every chunk, delta.reasoning, and a delta:{} finish chunk', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION });
        expect(sse.contentType).to.equal('text/event-stream');
        const { id, created } = json(sse.frames[0]!);
        expect(id).to.match(/^chatcmpl-\d{1,3}$/);
        const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"qwen3:8b","system_fingerprint":"fp_ollama"`;
        expect(sse.frames).to.deep.equal([
          `${head},"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Add"},"finish_reason":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":"","reasoning":" them"},"finish_reason":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":"","reasoning":"."},"finish_reason":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":"2 +"},"finish_reason":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":" 2 ="},"finish_reason":null}]}`,
          `${head},"choices":[{"index":0,"delta":{"content":" 4."},"finish_reason":null}]}`,
          `${head},"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
          '[DONE]',
        ]);
      });

      it('splits a response holding thinking and content into a reasoning chunk without content', async () => {
        llm().setup({ piece: 200 });
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION });
        expect(sse.frames.slice(0, 2).map((frame) => JSON.stringify(json(frame).choices[0].delta))).to.deep.equal([
          '{"role":"assistant","reasoning":"Add them."}',
          '{"content":"2 + 2 = 4."}',
        ]);
      });

      it('escapes <, > and & the way Go does', async () => {
        llm().setup({ reasoningParser: false });
        llm().script({ turn: { reasoning: 'a & b', content: 'ok' } });
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION });
        expect(sse.frames[0]).to.include('"content":"\\u003cthi"');
        expect(sse.raw).to.include('"content":"a \\u0026 "');
        expect(sse.raw).to.not.match(/[<>&]/);
        expect(joined(sse.frames, (delta) => delta.content)).to.equal('<think>\na & b\n</think>\n\nok');
      });

      it('sends each tool call whole with its position as index and a call_ id', async () => {
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION, tools: WEATHER_TOOLS });
        const deltas = sse.frames.slice(0, -1).map((frame) => json(frame).choices[0]?.delta);
        expect(deltas).to.have.length(3);
        const [first, second] = [deltas[0].tool_calls[0], deltas[1].tool_calls[0]];
        expect(first.id).to.match(/^call_[a-z0-9]{8}$/);
        expect(JSON.stringify(deltas[0])).to.equal(`{"role":"assistant","content":"","tool_calls":[{"id":"${first.id}","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]}`);
        expect(JSON.stringify(deltas[1])).to.equal(`{"content":"","tool_calls":[{"id":"${second.id}","index":1,"type":"function","function":{"name":"get_time","arguments":"{\\"tz\\":\\"Europe/Paris\\"}"}}]}`);
        expect(json(sse.frames.at(-2)!).choices[0]).to.deep.equal({ index: 0, delta: {}, finish_reason: 'tool_calls' });
      });

      it('adds the usage chunk (prompt, completion, total) only with include_usage', async () => {
        const plain = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION });
        expect(plain.raw).to.not.include('usage');
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION, stream_options: { include_usage: true } });
        const { id, created } = json(sse.frames[0]!);
        expect(sse.frames.at(-2)).to.equal(`{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":${QUESTION_TOKENS},"completion_tokens":${ECHO_TOKENS},"total_tokens":${QUESTION_TOKENS + ECHO_TOKENS}}}`);
      });

      it('answers non-streamed with message.reasoning and a trailing newline', async () => {
        llm().script({ turn: THINKING });
        const text = await (await post(llm(), { model: 'qwen3:8b', messages: QUESTION })).text();
        const { id, created } = JSON.parse(text);
        expect(text).to.equal(`{"id":"${id}","object":"chat.completion","created":${created},"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"2 + 2 = 4.","reasoning":"Add them."},"finish_reason":"stop"}],"usage":{"prompt_tokens":${QUESTION_TOKENS},"completion_tokens":${THINKING_TOKENS},"total_tokens":${QUESTION_TOKENS + THINKING_TOKENS}}}\n`);
      });

      it('truncates an over-long prompt silently, keeping the system message, and records it', async () => {
        llm().setup({ contextWindow: 60 });
        const history = [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'a'.repeat(200) },
          { role: 'assistant', content: 'b'.repeat(200) },
          { role: 'user', content: 'Last question?' },
        ];
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: history, stream_options: { include_usage: true } });
        expect(sse.status).to.equal(200);
        expect(llm().truncations).to.equal(1);
        expect(llm().requests[0]!.truncated).to.deep.equal({ dropped: 2, promptTokens: 4 + 3 + 4 + 4 });
        expect(json(sse.frames.at(-2)!).usage.prompt_tokens).to.equal(15);
        expect(joined(sse.frames, (delta) => delta.content)).to.equal('Echo: Last question?');
      });

      it('lists models without a context length and reports the runtime window in /api/ps', async () => {
        llm().setup({ contextWindow: 8192 });
        const models = await (await fetch(`${llm().url}/models`)).text();
        expect(models).to.equal(`{"object":"list","data":[{"id":"qwen3:8b","object":"model","created":${JSON.parse(models).data[0].created},"owned_by":"library"}]}\n`);
        const ps = await readJson(fetch(`${llm().origin}/api/ps`));
        expect(Object.keys(ps.models[0])).to.deep.equal(['name', 'model', 'size', 'digest', 'details', 'expires_at', 'size_vram', 'context_length']);
        expect(ps.models[0].context_length).to.equal(8192);
      });

      it('has no tokenize endpoint', async () => {
        for (const path of ['/tokenize', '/api/tokenize', '/v1/tokenize']) {
          expect((await fetch(`${llm().origin}${path}`, { method: 'POST', body: '{}' })).status).to.equal(404);
        }
      });

      it('leaves tool markup in content with finish "stop" when the model has no tool parser', async () => {
        llm().setup({ toolCallParser: false, toolCallFormat: 'mistral' });
        llm().script({ turn: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] } });
        const body = await readJson(post(llm(), { model: 'qwen3:8b', messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(body.choices[0].message).to.deep.equal({ role: 'assistant', content: '[TOOL_CALLS][{"name":"get_weather","arguments":{"city":"Paris"}}]' });
        expect(body.choices[0].finish_reason).to.equal('stop');
      });

      it('fails in the OpenAI error shape of its middleware', async () => {
        llm().fail({ status: 503 });
        const response = await post(llm(), { model: 'qwen3:8b', messages: QUESTION });
        expect(response.status).to.equal(503);
        expect(await response.text()).to.equal('{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error","param":null,"code":null}}\n');
      });
    });
  });

  describe('ollama-0.8', () => {
    withReplay({ server: 'ollama-0.8' }, (llm) => {
      it('sends every parallel tool call with index 0, role on every chunk, finish on the done chunk', async () => {
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION, tools: WEATHER_TOOLS, stream_options: { include_usage: true } });
        const { id, created } = json(sse.frames[0]!);
        const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"qwen3:8b","system_fingerprint":"fp_ollama"`;
        const calls = sse.frames.slice(0, 2).map((frame) => json(frame).choices[0].delta.tool_calls[0]);
        expect(calls.map((call) => call.index)).to.deep.equal([0, 0]);
        expect(calls[0].id).to.match(/^call_[a-z0-9]{8}$/);
        expect(calls[0].id).to.not.equal(calls[1].id);
        expect(sse.frames[0]).to.equal(`${head},"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"${calls[0].id}","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},"finish_reason":null}]}`);
        expect(sse.frames[2]).to.equal(`${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`);
        expect(sse.frames[3]).to.equal(`${head},"choices":[],"usage":{"prompt_tokens":${JSON.parse(sse.frames[3]!).usage.prompt_tokens},"completion_tokens":${JSON.parse(sse.frames[3]!).usage.completion_tokens},"total_tokens":${JSON.parse(sse.frames[3]!).usage.total_tokens}}}`);
        expect(sse.frames[4]).to.equal('[DONE]');
      });

      it('has no reasoning field: think tags stay in content, Go-escaped', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { model: 'qwen3:8b', messages: QUESTION });
        expect(sse.raw).to.not.include('reasoning');
        expect(json(sse.frames[0]!).choices[0].delta).to.deep.equal({ role: 'assistant', content: '<thi' });
        expect(sse.frames[0]).to.include('"content":"\\u003cthi"');
        expect(joined(sse.frames, (delta) => delta.content)).to.equal('<think>\nAdd them.\n</think>\n\n2 + 2 = 4.');
      });

      it('writes arguments with sorted keys (a Go map) and index 0 in the non-streamed body', async () => {
        llm().script({ turn: { toolCalls: [{ name: 'get_time', arguments: { tz: 'UTC', format: 'iso' } }, { name: 'get_weather', arguments: { city: 'Paris' } }] } });
        const body = await readJson(post(llm(), { model: 'qwen3:8b', messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(body.choices[0].finish_reason).to.equal('tool_calls');
        expect(body.choices[0].message.tool_calls.map((call: { index: number }) => call.index)).to.deep.equal([0, 0]);
        expect(body.choices[0].message.tool_calls[0].function.arguments).to.equal('{"format":"iso","tz":"UTC"}');
      });

      it('reports /api/ps without context_length (added in v0.10.0)', async () => {
        const ps = await readJson(fetch(`${llm().origin}/api/ps`));
        expect(ps.models[0]).to.not.have.property('context_length');
      });
    });
  });

  describe('ollama-0.4', () => {
    withReplay({ server: 'ollama-0.4' }, (llm) => {
      it('streams no usage although asked, and every parallel tool call in one chunk without an index, finishing stop', async () => {
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { model: 'llama3.1:8b', messages: QUESTION, tools: WEATHER_TOOLS, stream_options: { include_usage: true } });
        expect(sse.raw).to.not.include('usage');
        expect(sse.frames).to.have.length(3);
        const calls = json(sse.frames[0]!).choices[0].delta.tool_calls;
        expect(calls.map((call: { function: { name: string } }) => call.function.name)).to.deep.equal(['get_weather', 'get_time']);
        for (const call of calls) expect(call).to.have.keys(['id', 'type', 'function']);
        expect(json(sse.frames[1]!).choices[0]).to.deep.equal({ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: 'stop' });
        expect(sse.frames[2]).to.equal('[DONE]');
      });

      it('gives usage and the tool_calls finish reason in the non-streamed body', async () => {
        llm().script({ turn: TWO_CALLS });
        const body = await readJson(post(llm(), { model: 'llama3.1:8b', messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(body.choices[0].finish_reason).to.equal('tool_calls');
        expect(body.usage.prompt_tokens).to.be.greaterThan(0);
      });
    });
  });

  describe('llamacpp', () => {
    withReplay({ server: 'llamacpp' }, (llm) => {
      it('streams nlohmann-ordered chunks with a null-content first delta and timings on the finish chunk', async () => {
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { messages: QUESTION });
        const { id, created } = json(sse.frames[0]!);
        expect(id).to.match(/^chatcmpl-[0-9A-Za-z]{32}$/);
        const tail = `"created":${created},"id":"${id}","model":"qwen3-8b","system_fingerprint":"b6497-cd08fc3e","object":"chat.completion.chunk"`;
        expect(sse.frames.slice(0, -2)).to.deep.equal([
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],${tail}}`,
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"Add "}}],${tail}}`,
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"them"}}],${tail}}`,
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"."}}],${tail}}`,
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"2 + "}}],${tail}}`,
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"2 = "}}],${tail}}`,
          `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"4."}}],${tail}}`,
        ]);
        expect(sse.frames.at(-2)).to.match(new RegExp(`^\\{"choices":\\[\\{"finish_reason":"stop","index":0,"delta":\\{\\}\\}\\],${tail.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')},"timings":\\{"cache_n":0,"prompt_n":${QUESTION_TOKENS},"prompt_ms":[0-9.]+,`));
        expect(sse.raw).to.not.include('usage');
        expect(sse.frames.at(-1)).to.equal('[DONE]');
      });

      it('sends usage in a choices:[] chunk carrying the timings only with include_usage', async () => {
        const sse = await stream(llm(), { messages: QUESTION, stream_options: { include_usage: true } });
        const finish = json(sse.frames.at(-3)!);
        const usage = json(sse.frames.at(-2)!);
        expect(finish).to.not.have.property('timings');
        expect(Object.keys(usage)).to.deep.equal(['choices', 'created', 'id', 'model', 'system_fingerprint', 'object', 'usage', 'timings']);
        expect(usage.choices).to.deep.equal([]);
        expect(JSON.stringify(usage.usage)).to.equal(`{"completion_tokens":${ECHO_TOKENS},"prompt_tokens":${QUESTION_TOKENS},"total_tokens":${QUESTION_TOKENS + ECHO_TOKENS}}`);
      });

      it('streams tool calls with 32-alphanumeric ids and compact argument text', async () => {
        llm().script({ turn: TWO_CALLS });
        const sse = await stream(llm(), { messages: QUESTION, tools: WEATHER_TOOLS });
        const first = json(sse.frames[1]!).choices[0].delta.tool_calls[0];
        expect(first.id).to.match(/^[0-9A-Za-z]{32}$/);
        expect(JSON.stringify(first)).to.equal(`{"index":0,"id":"${first.id}","type":"function","function":{"name":"get_weather","arguments":"{\\"ci"}}`);
        expect(JSON.stringify(json(sse.frames[2]!).choices[0].delta)).to.equal('{"tool_calls":[{"index":0,"function":{"arguments":"ty\\":"}}]}');
        expect(argumentsOf(sse.frames, 0)).to.equal('{"city":"Paris"}');
        expect(argumentsOf(sse.frames, 1)).to.equal('{"tz":"Europe/Paris"}');
        expect(json(sse.frames.at(-2)!).choices[0]).to.deep.equal({ finish_reason: 'tool_calls', index: 0, delta: {} });
      });

      it('leaves <think> in content with --reasoning-format none', async () => {
        llm().setup({ reasoningParser: false });
        llm().script({ turn: THINKING });
        const sse = await stream(llm(), { messages: QUESTION });
        expect(sse.raw).to.not.include('reasoning_content');
        expect(joined(sse.frames, (delta) => delta.content)).to.equal('<think>\nAdd them.\n</think>\n\n2 + 2 = 4.');
      });

      it('refuses a prompt over the slot context with exceed_context_size_error, as JSON for stream:true', async () => {
        llm().setup({ contextWindow: 20 });
        const response = await post(llm(), { messages: [{ role: 'user', content: 'x'.repeat(80) }], stream: true });
        expect(response.status).to.equal(400);
        expect(response.headers.get('content-type')).to.equal('application/json; charset=utf-8');
        expect(await response.text()).to.equal('{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":24,"n_ctx":20}}');
      });

      it('answers tools without --jinja and template errors with 500 server_error', async () => {
        llm().setup({ toolCallParser: false, requireAlternation: true });
        const tools = await post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS });
        expect(tools.status).to.equal(500);
        expect(await tools.text()).to.equal('{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}');
        const template = await post(llm(), { messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] });
        expect(template.status).to.equal(500);
        expect(await readJson(template)).to.deep.equal({ error: { code: 500, message: 'Conversation roles must alternate user/assistant/user/assistant/...', type: 'server_error' } });
      });

      it('reports the slot n_ctx in /props and only n_ctx_train in /v1/models', async () => {
        llm().setup({ contextWindow: 8192 });
        const props = await (await fetch(`${llm().origin}/props`)).text();
        expect(props).to.match(/^\{"default_generation_settings":\{"params":\{"seed":4294967295,"temperature":0\.8,"dynatemp_range":0\.0,/);
        expect(JSON.parse(props).default_generation_settings.n_ctx).to.equal(8192);
        const models = await readJson(fetch(`${llm().url}/models`));
        expect(Object.keys(models)).to.deep.equal(['models', 'object', 'data']);
        expect(models.data[0]).to.include({ id: 'qwen3-8b', object: 'model', owned_by: 'llamacpp' });
        expect(models.data[0].meta.n_ctx_train).to.equal(40960);
        expect(JSON.stringify(models)).to.not.include('8192');
      });

      it('tokenizes {"content"} into {"tokens"}', async () => {
        const text = await (await fetch(`${llm().origin}/tokenize`, { method: 'POST', body: JSON.stringify({ content: 'Hello world!' }) })).text();
        expect(text).to.match(/^\{"tokens":\[\d+,\d+,\d+\]\}$/);
      });

      it('answers non-streamed with content before reasoning_content and timings after the id', async () => {
        llm().script({ turn: THINKING });
        const text = await (await post(llm(), { messages: QUESTION })).text();
        const body = JSON.parse(text);
        expect(Object.keys(body)).to.deep.equal(['choices', 'created', 'model', 'system_fingerprint', 'object', 'usage', 'id', 'timings']);
        expect(JSON.stringify(body.choices[0])).to.equal('{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"2 + 2 = 4.","reasoning_content":"Add them."}}');
      });
    });
  });

  describe('llamacpp-2025', () => {
    withReplay({ server: 'llamacpp-2025' }, (llm) => {
      it('puts usage and timings in the finish chunk even without include_usage', async () => {
        const sse = await stream(llm(), { model: 'gpt-4o', messages: QUESTION });
        const finish = json(sse.frames.at(-2)!);
        expect(Object.keys(finish)).to.deep.equal(['choices', 'created', 'id', 'model', 'system_fingerprint', 'object', 'usage', 'timings']);
        expect(finish.choices).to.deep.equal([{ finish_reason: 'stop', index: 0, delta: {} }]);
        expect(finish.usage).to.deep.equal({ completion_tokens: ECHO_TOKENS, prompt_tokens: QUESTION_TOKENS, total_tokens: QUESTION_TOKENS + ECHO_TOKENS });
        expect(finish.model).to.equal('gpt-4o');
        const withUsage = await stream(llm(), { messages: QUESTION, stream_options: { include_usage: true } });
        expect(withUsage.frames.filter((frame) => frame.includes('"choices":[]'))).to.deep.equal([]);
      });

      it('writes reasoning_content before content and null content beside tool calls', async () => {
        llm().script({ turn: THINKING, times: 1 }, { turn: TWO_CALLS });
        const thinking = await readJson(post(llm(), { messages: QUESTION }));
        expect(Object.keys(thinking.choices[0].message)).to.deep.equal(['role', 'reasoning_content', 'content']);
        const calls = await readJson(post(llm(), { messages: QUESTION, tools: WEATHER_TOOLS }));
        expect(calls.choices[0].message.content).to.equal(null);
        expect(Object.keys(calls.choices[0].message.tool_calls[0])).to.deep.equal(['type', 'function', 'id']);
      });
    });
  });

  describe('replay behaviour', () => {
    withReplay({ server: 'vllm' }, (llm) => {
      it('answers with the first matching rule that has uses left, then echoes', async () => {
        llm().script(
          { match: { hasToolResults: true }, turn: { content: 'after tools' } },
          { match: { lastUserIncludes: 'weather' }, turn: (request) => ({ content: `${request.messages.length} messages` }), times: 1 },
        );
        const content = async (messages: unknown[]) => (await readJson(post(llm(), { messages }))).choices[0].message.content;
        expect(await content([{ role: 'user', content: 'the weather?' }])).to.equal('1 messages');
        expect(await content([{ role: 'user', content: 'the weather?' }])).to.equal('Echo: the weather?');
        expect(await content([
          { role: 'user', content: 'the weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
        ])).to.equal('after tools');
      });

      it('records every request and forgets them on reset', async () => {
        await post(llm(), { messages: QUESTION });
        await fetch(`${llm().url}/models`);
        expect(llm().requests.map((request) => `${request.method} ${request.path}`)).to.deep.equal(['POST /v1/chat/completions', 'GET /v1/models']);
        expect(llm().requests[0]!.body.messages).to.deep.equal(QUESTION);
        llm().reset();
        expect(llm().requests).to.deep.equal([]);
      });

      it('fails as many requests as asked, then answers', async () => {
        llm().fail({ status: 429, times: 2 }, { status: 500, message: 'boom' });
        const statuses = [];
        for (let attempt = 0; attempt < 4; attempt++) statuses.push((await post(llm(), { messages: QUESTION })).status);
        expect(statuses).to.deep.equal([429, 429, 500, 200]);
      });

      it('accepts tool results after an assistant tool call under requireAlternation', async () => {
        llm().setup({ requireAlternation: true });
        const response = await post(llm(), {
          messages: [
            { role: 'system', content: 's' },
            { role: 'user', content: 'u' },
            { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
            { role: 'tool', tool_call_id: 'c1', content: 'r' },
          ],
        });
        expect(response.status).to.equal(200);
      });
    });

    for (const name of Object.keys(SERVER_FIXTURES) as ServerName[]) {
      it(`${name} answers unknown paths with 404 and the default turn with an echo`, async () => {
        const llm = await startReplayLlm({ server: name });
        try {
          expect((await fetch(`${llm.origin}/nowhere`)).status).to.equal(404);
          const sse = await stream(llm, { model: 'm', messages: QUESTION });
          expect(sse.status).to.equal(200);
          expect(joined(sse.frames, (delta) => delta.content)).to.equal('Echo: What is 2+2?');
          expect(sse.frames.at(-1)).to.equal('[DONE]');
        } finally {
          await llm.close();
        }
      });
    }
  });
});
