import { expect } from 'chai';
import { TOOL_CALL_FORMATS, ToolCallMarkupReader, type TextToolCall, type ToolCallFormat } from '../../runtime/llm/tool-call-markup.js';

/** Reads a reply cut into pieces of `size` characters; returns its text, its calls, and the text let out before the end. */
function read(text: string, size = text.length, formats: readonly ToolCallFormat[] = TOOL_CALL_FORMATS) {
  const reader = new ToolCallMarkupReader(formats);
  let content = '';
  const calls: TextToolCall[] = [];
  for (let at = 0; at < text.length; at += size) {
    const piece = reader.push(text.slice(at, at + size));
    content += piece.content;
    calls.push(...piece.calls);
  }
  const streamed = content;
  const rest = reader.end();
  return { content: content + rest.content, calls: [...calls, ...rest.calls].map(({ name, arguments: args, format }) => ({ name, args, format })), streamed };
}

describe('ToolCallMarkupReader', () => {
  // Two calls as Qwen2.5 writes them (SGLang qwen25_detector.py's format, vLLM hermes_tool_parser.py's).
  const hermes =
    'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>';

  it('reads Hermes calls whatever the pieces are cut at, and keeps the text before them', () => {
    for (const size of [1, 3, 8, 1000]) {
      const { content, calls } = read(hermes, size);
      expect({ size, content }).to.deep.equal({ size, content: 'Let me check.' });
      expect(calls).to.deep.equal([
        { name: 'get_weather', args: '{"city":"Paris"}', format: 'hermes' },
        { name: 'get_time', args: '{"tz":"Europe/Paris"}', format: 'hermes' },
      ]);
    }
  });

  it('lets the text before a call out as it streams and holds back only what may begin a marker', () => {
    const reader = new ToolCallMarkupReader(TOOL_CALL_FORMATS);
    expect(reader.push('Let me ')).to.deep.equal({ content: 'Let me', calls: [] });
    expect(reader.push('check <to')).to.deep.equal({ content: ' check', calls: [] });
    // The space before the call is the call's, not the reply's.
    expect(reader.push('ol_call>{"name": "a", "arguments": {}}</tool_call>')).to.deep.equal({ content: '', calls: [{ format: 'hermes', name: 'a', arguments: '{}' }] });
  });

  it('reads a call whose closing tag a stop word took', () => {
    expect(read('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n').calls).to.deep.equal([{ name: 'a', args: '{"x":1}', format: 'hermes' }]);
  });

  it('gives a call with broken JSON its name and the arguments as written, for the tool to answer with an error', () => {
    const { calls, content } = read('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"</tool_call>');
    expect(content).to.equal('');
    expect(calls).to.deep.equal([{ name: 'get_weather', args: '{"city": "Paris"', format: 'hermes' }]);
  });

  it('keeps the arguments whole when only the call object is left open', () => {
    expect(read('<tool_call>{"name": "a", "arguments": {"q": "x"}</tool_call>').calls).to.deep.equal([{ name: 'a', args: '{"q": "x"}', format: 'hermes' }]);
  });

  it('gives markup that holds no readable call back as text', () => {
    expect(read('<tool_call>not a call</tool_call> done')).to.include({ content: '<tool_call>not a call</tool_call> done' });
  });

  it('reads Llama 3 calls: bare JSON with parameters, several joined by semicolons, or after the python tag', () => {
    const bare = '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {"tz": "UTC"}}';
    for (const text of [bare, `<|python_tag|>${bare}`]) {
      expect(read(text, 5).calls).to.deep.equal([
        { name: 'get_weather', args: '{"city":"Paris"}', format: 'llama3_json' },
        { name: 'get_time', args: '{"tz":"UTC"}', format: 'llama3_json' },
      ]);
    }
  });

  it('gives a reply that begins with a brace but is no call back as text at its end', () => {
    const { content, calls, streamed } = read('{braces} are used for sets.', 4);
    expect(calls).to.deep.equal([]);
    expect(streamed).to.equal('');
    expect(content).to.equal('{braces} are used for sets.');
  });

  it('reads Mistral calls: a JSON array, and the name[ARGS] form of newer tokenizers', () => {
    expect(read('[TOOL_CALLS][{"name": "add", "arguments": {"a": 3, "b": 4}, "id": "Xk3pQ9aZ2"}]', 6).calls).to.deep.equal([{ name: 'add', args: '{"a":3,"b":4}', format: 'mistral' }]);
    expect(read('[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}[TOOL_CALLS]multiply[ARGS]{"a": 2, "b": 5}', 6).calls).to.deep.equal([
      { name: 'add', args: '{"a": 3.5, "b": 4}', format: 'mistral' },
      { name: 'multiply', args: '{"a": 2, "b": 5}', format: 'mistral' },
    ]);
    expect(read('[TOOL_CALLS]add{"a": 1}').calls).to.deep.equal([{ name: 'add', args: '{"a": 1}', format: 'mistral' }]);
  });

  it('keeps the id a Mistral model wrote for its call', () => {
    const reader = new ToolCallMarkupReader(['mistral']);
    reader.push('[TOOL_CALLS][{"name": "add", "arguments": {}, "id": "Xk3pQ9aZ2"}]');
    expect(reader.end().calls[0]?.id).to.equal('Xk3pQ9aZ2');
  });

  it('reads only the formats it is given', () => {
    expect(read(hermes, 4, ['mistral']).content).to.equal(hermes);
    expect(read('{"name": "a", "parameters": {}}', 4, ['hermes']).content).to.equal('{"name": "a", "parameters": {}}');
  });

  it('keeps a reply without markup whole, its blank lines included', () => {
    const text = 'Line one.\n\nLine two with <b>tags</b> and [brackets].\n';
    for (const size of [1, 7]) expect(read(text, size).content).to.equal(text);
  });
});
