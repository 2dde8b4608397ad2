import { expect } from 'chai';
import type { ChatMessage, ToolDefinition } from '../../runtime/chat-types.js';
import { createLlmClient, LlmCallError, type LlmClient, type LlmRequest, type ToolCallDelta } from '../../runtime/llm/llm-client.js';
import { SERVER_FIXTURES, type ServerName } from '../fixtures/llm-servers/index.js';
import { startReplayLlm, type ReplayLlm } from '../support/replay-llm-server.js';

// The LLM client against each server as it really answers: the replay upstream plays each
// server's wire shapes from test/fixtures/llm-servers/, each citing the server's source.

const TOOLS: ToolDefinition[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const SYSTEM: ChatMessage = { role: 'system', content: 'You are a helpful assistant.' };

function ask(text: string, more: Partial<LlmRequest> = {}): LlmRequest {
  return { model: 'default', temperature: 0.7, max_tokens: 256, messages: [SYSTEM, { role: 'user', content: text }], ...more };
}

/** A call streamed: what it handed on as it came, and its reply. */
async function streamed(client: LlmClient, request: LlmRequest) {
  const pieces = { content: [] as string[], reasoning: [] as string[], deltas: [] as ToolCallDelta[] };
  const reply = await client.generate(request, {
    onContent: (piece) => pieces.content.push(piece),
    onReasoning: (piece) => pieces.reasoning.push(piece),
    onToolCallDelta: (delta) => pieces.deltas.push(delta),
  });
  return { reply, pieces };
}

/** The chat requests the replay server received. */
function chatBodies(llm: ReplayLlm): Array<{ messages: Array<{ role: string; content?: unknown }>; tools?: unknown[]; stream?: boolean }> {
  return llm.requests.filter((request) => request.path.endsWith('/chat/completions')).map((request) => request.body);
}

/** A history of `turns` question-and-answer pairs of about 100 tokens each. */
function history(turns: number): ChatMessage[] {
  const words = Array.from({ length: 70 }, (_, index) => `word${index}`).join(' ');
  return Array.from({ length: turns }, (_, turn): ChatMessage[] => [
    { role: 'user', content: `question ${turn}: ${words}` },
    { role: 'assistant', content: `answer ${turn}: ${words}` },
  ]).flat();
}

/** The window each server tells, and where (Ollama 0.8's /api/ps has no context_length yet). */
const WINDOW_SOURCE: Record<ServerName, string | null> = {
  vllm: 'max_model_len',
  'vllm-0.13': 'max_model_len',
  'vllm-0.10': 'max_model_len',
  sglang: 'max_model_len',
  ollama: 'ollama_context_length',
  'ollama-0.8': null,
  'ollama-0.4': null,
  llamacpp: 'n_ctx',
  'llamacpp-2025': 'n_ctx',
};

for (const name of Object.keys(SERVER_FIXTURES) as ServerName[]) {
  describe(`the LLM client against ${name} (${SERVER_FIXTURES[name].summary})`, () => {
    let llm: ReplayLlm;
    let client: LlmClient;

    before(async () => {
      llm = await startReplayLlm({ server: name });
    });
    after(async () => llm?.close());
    beforeEach(() => {
      llm.reset();
      client = createLlmClient({ baseUrl: llm.url, apiKey: 'EMPTY', timeoutMs: 5000, model: 'default' });
    });
    afterEach(async () => client.close());

    it('takes the reasoning out of the reply, streamed and whole', async () => {
      llm.script({ turn: { reasoning: 'The user greets me.', content: 'Hello there!' } });
      const { reply, pieces } = await streamed(client, ask('Hi'));
      expect(reply.content).to.equal('Hello there!');
      expect(reply.reasoning.trim()).to.equal('The user greets me.');
      expect(pieces.content.join('')).to.equal('Hello there!');
      expect(pieces.reasoning.join('')).to.equal(reply.reasoning);
      const whole = await client.generate(ask('Hi'));
      expect(whole.content).to.equal('Hello there!');
      expect(whole.reasoning.trim()).to.equal('The user greets me.');
      expect(client.server().reasoning.length).to.be.greaterThan(0);
    });

    it('takes reasoning left inline in <think> tags out of the reply, when the server runs no reasoning parser', async () => {
      llm.setup({ reasoningParser: false, piece: 3 });
      llm.script({ turn: { reasoning: 'Add them.', content: '2 + 2 = 4.' } });
      const { reply, pieces } = await streamed(client, ask('What is 2+2?'));
      expect(reply.content).to.equal('2 + 2 = 4.');
      expect(reply.reasoning.trim()).to.equal('Add them.');
      expect(pieces.content.join('')).to.not.include('think');
    });

    it('reads a template-opened think tag: whole at once, then from the start of the next streamed replies', async () => {
      llm.setup({ reasoningParser: false, thinkOpensInPrompt: true, piece: 5 });
      llm.script({ turn: { reasoning: 'Thinking it over.', content: 'Done.' } });
      const first = await client.generate(ask('Go'));
      expect(first.content).to.equal('Done.');
      expect(first.reasoning.trim()).to.equal('Thinking it over.');
      const { reply, pieces } = await streamed(client, ask('Again'));
      expect(reply.content).to.equal('Done.');
      expect(pieces.content.join('')).to.equal('Done.');
      expect(pieces.reasoning.join('').trim()).to.equal('Thinking it over.');
    });

    it('returns parallel tool calls as separate calls with their own ids, streamed and whole', async () => {
      llm.script({
        turn: {
          toolCalls: [
            { name: 'get_weather', arguments: { city: 'Paris' } },
            { name: 'get_time', arguments: { tz: 'Europe/Paris' } },
          ],
        },
      });
      for (const stream of [true, false]) {
        const reply = stream ? (await streamed(client, ask('Weather and time?', { tools: TOOLS }))).reply : await client.generate(ask('Weather and time?', { tools: TOOLS }));
        expect({ stream, finish: reply.finishReason }).to.deep.equal({ stream, finish: 'tool_calls' });
        expect(reply.toolCalls.map((call) => [call.function.name, JSON.parse(call.function.arguments)])).to.deep.equal([
          ['get_weather', { city: 'Paris' }],
          ['get_time', { tz: 'Europe/Paris' }],
        ]);
        expect(new Set(reply.toolCalls.map((call) => call.id)).size).to.equal(2);
      }
    });

    it('reads tool calls the server left as text, when it runs no tool-call parser', async () => {
      llm.setup({ toolCallParser: false });
      llm.script({ match: { hasToolResults: false }, turn: { content: 'Let me check.', toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] } });
      const { reply, pieces } = await streamed(client, ask('Weather in Oslo?', { tools: TOOLS }));
      expect(reply.toolCalls.map((call) => [call.function.name, JSON.parse(call.function.arguments)])).to.deep.equal([['get_weather', { city: 'Oslo' }]]);
      expect(reply.finishReason).to.equal('tool_calls');
      expect(reply.content).to.equal('Let me check.');
      expect(pieces.content.join('')).to.not.include('tool_call');
      const bodies = chatBodies(llm);
      if (bodies.length > 1) {
        // The server refused tools (vLLM without a tool-call parser, llama.cpp without --jinja): they went in the prompt instead.
        expect(bodies.at(-1)!.tools).to.equal(undefined);
        expect(String(bodies.at(-1)!.messages[0]!.content)).to.include('<tools>');
        expect(client.server().tools_in_prompt).to.equal(true);
        expect(reply.repairs).to.include('tools_in_prompt');
      }
    });

    it('reports usage for every call: the server\'s, or counted and marked estimated when it streams none', async () => {
      const { reply } = await streamed(client, ask('Count me'));
      expect(reply.usage?.prompt_tokens).to.be.greaterThan(0);
      expect(reply.usage?.completion_tokens).to.be.greaterThan(0);
      const streamsUsage = name !== 'ollama-0.4';
      expect(Boolean(reply.usage?.estimated)).to.equal(!streamsUsage);
      expect(client.server().streams_usage).to.equal(streamsUsage);
      if (!streamsUsage) {
        expect(reply.repairs).to.include('usage_counted');
        // Ollama has no tokenizer endpoint: asked once, then the estimate.
        expect(client.server().tokenize).to.equal(false);
      }
    });

    it('learns the context window the server tells', async () => {
      await client.probe();
      const report = client.server();
      expect(report.context_window_source).to.equal(WINDOW_SOURCE[name]);
      expect(report.context_window).to.equal(WINDOW_SOURCE[name] === null ? null : 4096);
    });

    if (WINDOW_SOURCE[name] !== null) {
      it('fits a long history into the window: the newest turns, the system prompt and the new message', async () => {
        const request = ask('And now?', { messages: [SYSTEM, ...history(60), { role: 'user', content: 'And now?' }], max_tokens: 512 });
        const reply = await client.generate(request);
        expect(reply.content).to.equal('Echo: And now?');
        const sent = chatBodies(llm).at(-1)!.messages;
        expect(sent[0]).to.deep.equal(SYSTEM);
        expect(sent.at(-1)).to.deep.equal({ role: 'user', content: 'And now?' });
        expect(sent.length).to.be.lessThan(request.messages.length);
        expect(sent[1]!.role).to.equal('user');
        expect(reply.repairs.some((repair) => repair.startsWith('context_fitted:'))).to.equal(true);
        expect(llm.truncations).to.equal(0);
      });

      it('refuses a message that cannot fit before calling the model', async () => {
        const huge = Array.from({ length: 5000 }, (_, index) => `w${index}`).join(' ');
        const error = await client.generate(ask(huge)).catch((caught: unknown) => caught);
        expect(error).to.be.instanceOf(LlmCallError);
        expect((error as LlmCallError).code).to.equal('context_length_exceeded');
        expect(chatBodies(llm)).to.have.length(0);
      });
    }

    if (!name.startsWith('ollama')) {
      it("turns the server's own context-length error into context_length_exceeded", async () => {
        // A window set larger than the model's: the server is the one to refuse.
        const mistaken = createLlmClient({ baseUrl: llm.url, apiKey: 'EMPTY', timeoutMs: 5000, server: { contextWindow: 1_000_000 } });
        const huge = Array.from({ length: 5000 }, (_, index) => `w${index}`).join(' ');
        for (const stream of [false, true]) {
          const call = stream ? streamed(mistaken, ask(huge)) : mistaken.generate(ask(huge));
          const error = await call.catch((caught: unknown) => caught);
          expect(error, `stream: ${stream}`).to.be.instanceOf(LlmCallError);
          expect((error as LlmCallError).code).to.equal('context_length_exceeded');
          expect((error as Error).message).to.match(/^the conversation does not fit the model's context window: /);
        }
        await mistaken.close();
      });

      it('learns from the template that roles must alternate, and sends the call again in that shape', async () => {
        llm.setup({ requireAlternation: true });
        const messages: ChatMessage[] = [SYSTEM, { role: 'system', content: 'Memories: none.' }, { role: 'user', content: 'One' }, { role: 'user', content: 'Two' }];
        const reply = await client.generate(ask('', { messages }));
        expect(reply.content).to.equal('Echo: One\n\nTwo');
        const bodies = chatBodies(llm);
        expect(bodies).to.have.length(2);
        expect(bodies[1]!.messages.map((message) => message.role)).to.deep.equal(['system', 'user']);
        expect(client.server().alternate_roles).to.equal(true);
        // Learnt once: the next call is shaped from the start.
        await client.generate(ask('', { messages }));
        expect(chatBodies(llm)).to.have.length(3);
      });
    }
  });
}

describe('the LLM client given a context-length error inside a stream', () => {
  it("turns older SGLang's in-stream error (HTTP 200, an error event, then [DONE]) into context_length_exceeded", async () => {
    const { createServer } = await import('node:http');
    // SGLang's serving_chat before 0c078e6f sent the validation error as the stream's only event.
    const legacy = SERVER_FIXTURES.sglang.contextLengthError(50_000, 40_960, 256)!.legacyInStream!;
    const server = createServer((req, res) => {
      req.resume();
      if (!req.url?.endsWith('/chat/completions')) return void res.writeHead(404).end();
      res.writeHead(legacy.status, { 'content-type': 'text/event-stream' });
      res.end(legacy.frames.map((frame) => `data: ${frame}\n\n`).join(''));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = createLlmClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'EMPTY', timeoutMs: 5000 });
    try {
      const error = await streamed(client, ask('x')).catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(LlmCallError);
      expect((error as LlmCallError).code).to.equal('context_length_exceeded');
      expect((error as Error).message).to.include("is longer than the model's context length");
    } finally {
      await client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('the LLM client behind a proxy that hides where the server tells its window', () => {
  for (const name of ['vllm', 'vllm-0.13', 'vllm-0.10', 'sglang', 'llamacpp', 'llamacpp-2025'] as const) {
    it(`learns the window ${name} names in its context-length error, and fits the call into it`, async () => {
      const { createServer, request: forward } = await import('node:http');
      const llm = await startReplayLlm({ server: name, setup: { contextWindow: 2048 } });
      // Passes chat completions on, and answers 404 where the window is told (/v1/models, /props, /api/ps).
      const proxy = createServer((req, res) => {
        if (!req.url?.endsWith('/chat/completions')) return void req.resume().on('end', () => res.writeHead(404).end());
        const upstream = forward(`${llm.origin}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        req.pipe(upstream);
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const { port } = proxy.address() as { port: number };
      const client = createLlmClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'EMPTY', timeoutMs: 5000 });
      try {
        const reply = await client.generate(ask('And now?', { messages: [SYSTEM, ...history(40), { role: 'user', content: 'And now?' }], max_tokens: 256 }));
        expect(reply.content).to.equal('Echo: And now?');
        expect(client.server()).to.deep.include({ context_window: 2048, context_window_source: 'error' });
        const [refused, fitted] = chatBodies(llm);
        expect(fitted!.messages.length).to.be.lessThan(refused!.messages.length);
      } finally {
        await client.close();
        proxy.closeAllConnections();
        await new Promise((resolve) => proxy.close(resolve));
        await llm.close();
      }
    });
  }
});

describe('the LLM client given a max_tokens beyond reason', () => {
  it('asks the server for no more than the limit and what the window leaves after the prompt', async () => {
    const llm = await startReplayLlm({ server: 'vllm', setup: { contextWindow: 4096 } });
    const client = createLlmClient({ baseUrl: llm.url, apiKey: 'EMPTY', timeoutMs: 5000, maxTokensLimit: 2000 });
    const unbounded = createLlmClient({ baseUrl: llm.url, apiKey: 'EMPTY', timeoutMs: 5000 });
    try {
      const limited = await client.generate(ask('Write a lot', { max_tokens: 1e15 }));
      expect(limited.content).to.equal('Echo: Write a lot');
      expect(chatBodies(llm).at(-1)).to.include({ max_tokens: 2000 });
      expect(limited.repairs).to.include('max_tokens_lowered:2000');
      // Without a limit, the window bounds it: the server would refuse prompt + max_tokens over 4096.
      const windowed = await unbounded.generate(ask('Write a lot', { max_tokens: 1e15 }));
      expect(windowed.content).to.equal('Echo: Write a lot');
      const sent = (chatBodies(llm).at(-1) as unknown as { max_tokens: number }).max_tokens;
      expect(sent).to.be.greaterThan(3900).and.at.most(4096);
    } finally {
      await client.close();
      await unbounded.close();
      await llm.close();
    }
  });
});
