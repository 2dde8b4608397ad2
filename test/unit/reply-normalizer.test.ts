import { expect } from 'chai';
import { ReplyNormalizer, type NormalizerOptions } from '../../runtime/llm/reply-normalizer.js';
import { TOOL_CALL_FORMATS } from '../../runtime/llm/tool-call-markup.js';
import type { ToolCallDelta } from '../../runtime/llm/tool-call-assembler.js';

/** A normaliser that records what it hands on. */
function normalizer(options: Partial<NormalizerOptions> = {}) {
  const sent = { content: [] as string[], reasoning: [] as string[], deltas: [] as ToolCallDelta[] };
  const reader = new ReplyNormalizer({
    toolFormats: [],
    startsInReasoning: false,
    maxChars: 100_000,
    onContent: (piece) => sent.content.push(piece),
    onReasoning: (piece) => sent.reasoning.push(piece),
    onToolCallDelta: (delta) => sent.deltas.push(delta),
    ...options,
  });
  return { reader, sent };
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ choices: [{ index: 0, delta, finish_reason: finish }] });

describe('ReplyNormalizer', () => {
  it('takes reasoning from vLLM 0.11.1-0.15 deltas that carry both fields once, not twice', () => {
    const { reader, sent } = normalizer();
    reader.chunk(chunk({ role: 'assistant', content: '', reasoning_content: null }));
    reader.chunk(chunk({ reasoning: 'Two plus', reasoning_content: 'Two plus' }));
    reader.chunk(chunk({ reasoning: ' two.', reasoning_content: ' two.' }));
    reader.chunk(chunk({ content: '\n\n4', reasoning_content: null }));
    reader.chunk(chunk({ content: '', reasoning_content: null }, 'stop'));
    const reply = reader.result();
    expect(reply).to.deep.include({ reasoning: 'Two plus two.', content: '4', finishReason: 'stop' });
    expect(sent.reasoning.join('')).to.equal('Two plus two.');
    expect(sent.content).to.deep.equal(['4']);
    expect([...reply.observed.reasoning]).to.deep.equal(['reasoning']);
  });

  it('takes reasoning_content from SGLang and llama.cpp, and reasoning from Ollama', () => {
    for (const field of ['reasoning_content', 'reasoning']) {
      const { reader } = normalizer();
      reader.chunk(chunk({ [field]: 'hmm' }));
      reader.chunk(chunk({ content: 'ok' }, 'stop'));
      expect(reader.result()).to.deep.include({ reasoning: 'hmm', content: 'ok' });
    }
  });

  it('reads a whole message: reasoning, content, and tool calls whose index is -1 (SGLang) or whose arguments are an object', () => {
    const { reader } = normalizer();
    reader.completion({
      choices: [
        {
          message: {
            role: 'assistant',
            content: '',
            reasoning_content: 'I should look it up.',
            tool_calls: [
              { id: 'call_1', index: -1, type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
              { id: null, index: -1, type: 'function', function: { name: 'get_time', arguments: { tz: 'UTC' } } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, reasoning_tokens: 3 },
    });
    const reply = reader.result();
    expect(reply.reasoning).to.equal('I should look it up.');
    expect(reply.toolCalls.map((call) => [call.function.name, call.function.arguments])).to.deep.equal([
      ['get_weather', '{"city": "Paris"}'],
      ['get_time', '{"tz":"UTC"}'],
    ]);
    expect(reply.toolCalls[0]!.id).to.equal('call_1');
    expect(reply.toolCalls[1]!.id).to.match(/^call_[0-9a-f]{24}$/);
    expect(reply.usage).to.deep.equal({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, reasoning_tokens: 3 });
    expect([...reply.observed.repairs]).to.include.members(['tool_call_id', 'tool_call_arguments_object']);
  });

  it('makes parallel calls streamed with one index but their own ids separate calls (Ollama 0.8 to 0.9)', () => {
    const { reader, sent } = normalizer();
    reader.chunk(chunk({ role: 'assistant', content: '', tool_calls: [{ id: 'call_aaaa1111', index: 0, type: 'function', function: { name: 'a', arguments: '{"x":1}' } }] }));
    reader.chunk(chunk({ role: 'assistant', content: '', tool_calls: [{ id: 'call_bbbb2222', index: 0, type: 'function', function: { name: 'b', arguments: '{"y":2}' } }] }));
    reader.chunk(chunk({ role: 'assistant', content: '' }, 'tool_calls'));
    const reply = reader.result();
    expect(reply.toolCalls.map((call) => [call.id, call.function.name, call.function.arguments])).to.deep.equal([
      ['call_aaaa1111', 'a', '{"x":1}'],
      ['call_bbbb2222', 'b', '{"y":2}'],
    ]);
    expect(sent.deltas.map((delta) => delta.index)).to.deep.equal([0, 1]);
    expect([...reply.observed.repairs]).to.include('tool_call_index');
  });

  it('continues a call from pieces with a null id and name (SGLang) and without any (vLLM)', () => {
    const { reader, sent } = normalizer();
    reader.chunk(chunk({ tool_calls: [{ id: 'call_x', index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } }] }));
    reader.chunk(chunk({ tool_calls: [{ id: null, index: 0, type: 'function', function: { name: null, arguments: '{"city": "Pa' } }] }));
    reader.chunk(chunk({ tool_calls: [{ index: 0, function: { arguments: 'ris"}' } }] }));
    reader.chunk(chunk({ tool_calls: [{ id: 'call_y', type: 'function', index: 1, function: { name: 'get_time' } }] }));
    reader.chunk(chunk({ tool_calls: [{ index: 1, function: { arguments: '{}' } }] }));
    reader.chunk(chunk({ content: '' }, 'tool_calls'));
    const reply = reader.result();
    expect(reply.toolCalls.map((call) => [call.id, call.function.name, call.function.arguments])).to.deep.equal([
      ['call_x', 'get_weather', '{"city": "Paris"}'],
      ['call_y', 'get_time', '{}'],
    ]);
    expect(sent.deltas[0]).to.deep.equal({ index: 0, id: 'call_x', type: 'function', function: { name: 'get_weather' } });
    expect([...reply.observed.repairs]).to.deep.equal([]);
  });

  it('says plainly when a tool-call entry is malformed, or a call never got a name', () => {
    const { reader } = normalizer();
    expect(() => reader.chunk(chunk({ tool_calls: ['oops'] }))).to.throw(/malformed tool call: "oops"/);
    const unnamed = normalizer().reader;
    unnamed.chunk(chunk({ tool_calls: [{ index: 0, id: null, function: { arguments: '{}' } }] }));
    unnamed.chunk(chunk({}, 'tool_calls'));
    expect(() => unnamed.result()).to.throw(/tool call without a function name/);
    const whole = normalizer().reader;
    expect(() => whole.completion({ choices: [{ message: { role: 'assistant', content: null, tool_calls: [{ id: null, type: 'function' }] }, finish_reason: 'tool_calls' }] })).to.throw(
      /malformed tool call/,
    );
  });

  it('infers the tool_calls finish reason a server left at stop', () => {
    const { reader } = normalizer();
    reader.chunk(chunk({ tool_calls: [{ id: 'c', index: 0, type: 'function', function: { name: 'a', arguments: '{}' } }] }));
    reader.chunk(chunk({}, 'stop'));
    const reply = reader.result();
    expect(reply.finishReason).to.equal('tool_calls');
    expect([...reply.observed.repairs]).to.include('finish_reason');
  });

  it('reads tool calls a server left as text, streaming the text around them, and calls the finish tool_calls', () => {
    const { reader, sent } = normalizer({ toolFormats: TOOL_CALL_FORMATS });
    const text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    for (let at = 0; at < text.length; at += 5) reader.chunk(chunk({ content: text.slice(at, at + 5) }));
    reader.chunk(chunk({}, 'stop'));
    const reply = reader.result();
    expect(reply.content).to.equal('Checking.');
    expect(sent.content.join('')).to.equal('Checking.');
    expect(reply.toolCalls.map((call) => [call.function.name, call.function.arguments])).to.deep.equal([['get_weather', '{"city":"Paris"}']]);
    expect(sent.deltas).to.have.length(1);
    expect(reply.finishReason).to.equal('tool_calls');
    expect([...reply.observed.toolCalls]).to.deep.equal(['hermes']);
  });

  it('reads think tags and tool-call markup in one reply (Qwen3 without either parser)', () => {
    const { reader, sent } = normalizer({ toolFormats: TOOL_CALL_FORMATS });
    const text = '<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>';
    for (let at = 0; at < text.length; at += 3) reader.chunk(chunk({ content: text.slice(at, at + 3) }));
    reader.chunk(chunk({}, 'stop'));
    const reply = reader.result();
    expect(reply).to.deep.include({ reasoning: '\nThe user wants weather.\n', content: '' });
    expect(sent.content).to.deep.equal([]);
    expect(reply.toolCalls).to.have.length(1);
    expect([...reply.observed.reasoning]).to.deep.equal(['think_tags']);
  });

  it('cuts a reply past its bound and marks it length', () => {
    const { reader, sent } = normalizer({ maxChars: 10 });
    reader.chunk(chunk({ content: 'abcdefgh' }));
    expect(reader.isCut).to.equal(false);
    reader.chunk(chunk({ content: 'ijklmnop' }));
    expect(reader.isCut).to.equal(true);
    reader.chunk(chunk({ content: 'more' }));
    const reply = reader.result();
    expect(reply).to.deep.include({ content: 'abcdefghij', finishReason: 'length', cut: true });
    expect(sent.content.join('')).to.equal('abcdefghij');
  });

  it("takes llama.cpp's timings as usage when no usage came, and vLLM's reasoning token details", () => {
    const timed = normalizer().reader;
    timed.chunk({ ...chunk({}, 'stop'), timings: { cache_n: 2, prompt_n: 10, predicted_n: 7 } });
    expect(timed.result().usage).to.deep.equal({ prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 });
    const detailed = normalizer().reader;
    detailed.chunk(chunk({ content: 'x' }, 'stop'));
    detailed.chunk({ choices: [], usage: { prompt_tokens: 4, total_tokens: 9, completion_tokens: 5, completion_tokens_details: { reasoning_tokens: 3 } } });
    expect(detailed.result().usage).to.deep.equal({ prompt_tokens: 4, completion_tokens: 5, total_tokens: 9, reasoning_tokens: 3 });
  });
});
