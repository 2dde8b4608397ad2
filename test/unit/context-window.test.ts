import { expect } from 'chai';
import type { ChatMessage } from '../../runtime/chat-types.js';
import { ContextOverflow, fitContext } from '../../runtime/llm/context-window.js';
import { estimatePromptTokens, estimateTextTokens } from '../../runtime/llm/token-estimate.js';

const words = (count: number, word = 'lorem') => Array.from({ length: count }, () => word).join(' ');
const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });
const call = (id: string): ChatMessage => ({ role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }] });
const result = (id: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content: words(20) });

describe('estimateTextTokens', () => {
  it('counts about a token per 3.5 ASCII characters, two Cyrillic letters and one CJK character', () => {
    expect(estimateTextTokens('a'.repeat(35))).to.equal(10);
    expect(estimateTextTokens('д'.repeat(10))).to.equal(5);
    expect(estimateTextTokens('字'.repeat(10))).to.equal(10);
    expect(estimateTextTokens('😀'.repeat(4))).to.equal(4);
  });
});

describe('fitContext', () => {
  const system: ChatMessage = { role: 'system', content: 'You are a helpful assistant.' };
  const history = Array.from({ length: 10 }, (_, turn) => [user(`question ${turn} ${words(40)}`), assistant(`answer ${turn} ${words(40)}`)]).flat();
  const latest = user('What now?');

  it('keeps every message when they fit, by their length or by the estimate', () => {
    const messages = [system, ...history, latest];
    const characters = messages.reduce((sum, message) => sum + String(message.content).length, 0);
    // The first window holds the characters themselves; the second only their estimate.
    for (const window of [100_000, Math.ceil(characters / 2)]) {
      const fitted = fitContext(messages, { window, maxTokens: 100, scale: 1 });
      expect(fitted.messages).to.deep.equal(messages);
      expect(fitted.dropped).to.equal(0);
      expect(fitted.history).to.equal(history.length);
    }
  });

  it('keeps the system prompt, the new message and the most recent turns that fit, leaving room for the reply', () => {
    const messages = [system, ...history, latest];
    const window = 300;
    const fitted = fitContext(messages, { window, maxTokens: 64, scale: 1 });
    expect(fitted.messages[0]).to.equal(system);
    expect(fitted.messages.at(-1)).to.equal(latest);
    expect(fitted.dropped).to.be.greaterThan(0);
    // What is kept is the newest history, whole turns from a question on.
    const kept = fitted.messages.slice(1, -1);
    expect(kept).to.deep.equal(history.slice(history.length - kept.length));
    expect(kept[0]?.role).to.equal('user');
    expect(estimatePromptTokens(fitted.messages) + 64).to.be.at.most(window);
  });

  it('drops a tool exchange whole, never a call without its result', () => {
    const messages = [system, user(words(60)), call('a'), result('a'), assistant(words(60)), user(words(10)), call('b'), result('b'), assistant('done'), latest];
    for (const window of [150, 200, 260, 320, 400]) {
      const fitted = fitContext(messages, { window, maxTokens: 10, scale: 1 });
      const ids = (role: string) => fitted.messages.filter((message) => message.role === role).length;
      expect({ window, calls: ids('tool') }).to.deep.equal({ window, calls: fitted.messages.filter((message) => message.role === 'assistant' && message.tool_calls).length });
      expect(fitted.messages.slice(1, -1)[0]?.role ?? 'user').to.equal('user');
    }
  });

  it("keeps the turn's own tool calls and results after the new message whatever they cost", () => {
    const messages = [system, ...history, latest, call('c'), result('c')];
    const fitted = fitContext(messages, { window: 200, maxTokens: 10, scale: 1 });
    expect(fitted.messages.slice(-3)).to.deep.equal([latest, call('c'), result('c')]);
  });

  it('counts by the scale learnt from the server', () => {
    const messages = [system, ...history, latest];
    const plain = fitContext(messages, { window: 600, maxTokens: 10, scale: 1 });
    const doubled = fitContext(messages, { window: 600, maxTokens: 10, scale: 2 });
    expect(doubled.messages.length).to.be.lessThan(plain.messages.length);
  });

  it('gives the reply what the window leaves, without history, when max_tokens asks for more than it holds', () => {
    const messages = [system, ...history, latest];
    const fitted = fitContext(messages, { window: 4096, maxTokens: 1e15, scale: 1 });
    expect(fitted.messages).to.deep.equal([system, latest]);
    expect(fitted.maxTokens).to.equal(4096 - estimatePromptTokens([system, latest]));
    expect(fitFor(1000).maxTokens).to.equal(1000);

    function fitFor(maxTokens: number) {
      return fitContext(messages, { window: 100_000, maxTokens, scale: 1 });
    }
  });

  it('refuses when the system prompt, tools and new message leave less than a short reply, naming the figures', () => {
    const long = user(words(3000));
    let error: unknown;
    try {
      fitContext([system, long], { window: 2048, maxTokens: 256, scale: 1 });
    } catch (caught) {
      error = caught;
    }
    expect(error).to.be.instanceOf(ContextOverflow);
    expect((error as ContextOverflow).window).to.equal(2048);
    expect((error as ContextOverflow).message).to.match(/maximum context length is 2048 tokens/);
  });

  it('counts the tool definitions as part of the least a call needs', () => {
    const tools = [{ type: 'function' as const, function: { name: 'big', description: words(800), parameters: { type: 'object' } } }];
    expect(() => fitContext([system, latest], { window: 1000, maxTokens: 10, tools, scale: 1 })).to.throw(ContextOverflow);
    expect(() => fitContext([system, latest], { window: 1000, maxTokens: 10, scale: 1 })).not.to.throw();
  });
});
