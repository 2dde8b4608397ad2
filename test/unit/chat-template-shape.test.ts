import { expect } from 'chai';
import type { ChatMessage } from '../../runtime/chat-types.js';
import { LENIENT_TEMPLATE, shapeForTemplate } from '../../runtime/llm/chat-template-shape.js';

const call = (id: string, name = 'lookup') => ({ id, type: 'function' as const, function: { name, arguments: '{}' } });

describe('shapeForTemplate', () => {
  it('leaves out empty messages but the last', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'S' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: '' },
      { role: 'assistant', content: 'Hello' },
      { role: 'user', content: '  ' },
      { role: 'user', content: 'Next' },
    ];
    expect(shapeForTemplate(messages, LENIENT_TEMPLATE).map((message) => [message.role, message.content])).to.deep.equal([
      ['system', 'S'],
      ['user', 'Hi'],
      ['assistant', 'Hello'],
      ['user', 'Next'],
    ]);
  });

  it('places tool results right after their calls, in the order of the calls, and leaves out unanswered calls and orphan results', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Q' },
      { role: 'assistant', content: '', tool_calls: [call('a'), call('b'), call('never')] },
      { role: 'tool', tool_call_id: 'b', content: 'B' },
      { role: 'user', content: 'interjection' },
      { role: 'tool', tool_call_id: 'a', content: 'A' },
      { role: 'tool', tool_call_id: 'orphan', content: 'O' },
      { role: 'assistant', content: 'Thinking', tool_calls: [call('z')] },
    ];
    const shaped = shapeForTemplate(messages, LENIENT_TEMPLATE);
    expect(shaped.map((message) => (message.role === 'tool' ? `tool:${message.tool_call_id}` : message.role))).to.deep.equal([
      'user',
      'assistant',
      'tool:a',
      'tool:b',
      'user',
      'assistant',
    ]);
    expect((shaped[1] as { tool_calls: Array<{ id: string }> }).tool_calls.map((entry) => entry.id)).to.deep.equal(['a', 'b']);
    expect(shaped[5]).to.deep.equal({ role: 'assistant', content: 'Thinking' });
  });

  it('makes roles alternate when the template requires it: one system message, same-role messages joined, no leading assistant', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Base prompt' },
      { role: 'system', content: 'Memories' },
      { role: 'assistant', content: 'Welcome!' },
      { role: 'user', content: 'First' },
      { role: 'user', content: 'Second' },
      { role: 'assistant', content: 'One' },
      { role: 'assistant', content: 'Two' },
      { role: 'user', content: 'Third' },
    ];
    expect(shapeForTemplate(messages, { alternateRoles: true, systemRole: true })).to.deep.equal([
      { role: 'system', content: 'Base prompt\n\nMemories' },
      { role: 'user', content: 'First\n\nSecond' },
      { role: 'assistant', content: 'One\n\nTwo' },
      { role: 'user', content: 'Third' },
    ]);
  });

  it('keeps a tool exchange whole when roles must alternate', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Q' },
      { role: 'assistant', content: 'Let me look.', tool_calls: [call('a')] },
      { role: 'tool', tool_call_id: 'a', content: 'A' },
      { role: 'assistant', content: 'It is A.' },
    ];
    expect(shapeForTemplate(messages, { alternateRoles: true, systemRole: true })).to.deep.equal(messages);
  });

  it('puts the system text at the head of the first user message for a template without a system role', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ];
    expect(shapeForTemplate(messages, { alternateRoles: true, systemRole: false })).to.deep.equal([{ role: 'user', content: 'Be brief.\n\nHi' }]);
  });
});
