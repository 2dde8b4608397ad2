import { expect } from 'chai';
import { startTestService, type TestService } from '../../support/service-harness.js';

/** What the Agents SDK sends back as the output of a hand-off call. */
const HANDOFF_OUTPUT = '{"assistant":"Refunds"}';
/** The scripted LLM answers the user after a hand-off (it leaves out the results of `transfer_to_` calls), a tool result otherwise. */
const SPECIALIST_REPLY = 'Echo: I want a refund';
const TRANSFER_TOOL = { name: 'transfer_to_refunds', description: 'Hand off to the refunds agent', parameters: { type: 'object', properties: {} } };

async function post(harness: TestService, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(`${harness.baseURL}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, json: await response.json() };
}

/** The roles of the LLM's last chat request after the system prompt, and its last message. */
function lastContext(harness: TestService): { roles: string[]; last: Record<string, unknown> } {
  const request = [...harness.llm.requests].reverse().find((candidate) => candidate.kind === 'chat')!;
  const messages = request.body.messages!.filter((message) => message.role !== 'system');
  return { roles: messages.map((message) => message.role), last: messages.at(-1) as Record<string, unknown> };
}

describe('a context that ends in tool results, with no tools offered (a hand-off to an agent without tools)', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService();
  });
  after(async () => harness?.close());
  beforeEach(() => {
    harness.llm.reset();
    // The triage agent's model hands off; any later round answers the tool result.
    harness.llm.script({ match: { lastUserIncludes: 'refund', hasToolResults: false }, reply: { toolCalls: [{ name: 'transfer_to_refunds', arguments: {} }] }, times: 1 });
  });

  describe('chat completions', () => {
    for (const tools of [[], undefined]) {
      it(`runs the turn and answers the tool results when tools is ${JSON.stringify(tools)}`, async () => {
        const user = { role: 'user', content: 'I want a refund' };
        const triage = await post(harness, '/chat/completions', { messages: [user], tools: [{ type: 'function', function: TRANSFER_TOOL }] });
        expect(triage.status).to.equal(200);
        const call = triage.json.choices[0].message.tool_calls[0];
        expect(call.function.name).to.equal('transfer_to_refunds');

        const messages = [user, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: HANDOFF_OUTPUT }];
        const specialist = await post(harness, '/chat/completions', { messages, ...(tools ? { tools } : {}) });
        expect(specialist.status, JSON.stringify(specialist.json)).to.equal(200);
        expect(specialist.json.choices[0].message.content).to.equal(SPECIALIST_REPLY);
        const context = lastContext(harness);
        expect(context.roles).to.deep.equal(['user', 'assistant', 'tool']);
        expect(context.last).to.deep.include({ role: 'tool', tool_call_id: call.id, content: HANDOFF_OUTPUT });
      });
    }

    it('runs a first request of a new session that ends in tool results, with no tools offered', async () => {
      const call = { id: 'call_lookup', type: 'function', function: { name: 'lookup_order', arguments: '{"id":7}' } };
      const messages = [{ role: 'user', content: 'hello' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: 'order 7: shipped' }];
      const answer = await post(harness, '/chat/completions', { messages, tools: [] });
      expect(answer.status, JSON.stringify(answer.json)).to.equal(200);
      expect(answer.json.choices[0].message.content).to.equal('Tool result: order 7: shipped');
      expect(lastContext(harness).roles).to.deep.equal(['user', 'assistant', 'tool']);
    });

    it('still answers 400 when the conversation ends in an assistant message', async () => {
      const answer = await post(harness, '/chat/completions', { messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y' }], tools: [] });
      expect(answer.status).to.equal(400);
      expect(answer.json.error.param).to.equal('messages');
    });
  });

  describe('the Responses API', () => {
    async function triage(): Promise<{ id: string; call: { call_id: string; name: string; arguments: string } }> {
      const answer = await post(harness, '/responses', { input: 'I want a refund', tools: [{ type: 'function', ...TRANSFER_TOOL }] });
      expect(answer.status).to.equal(200);
      const call = answer.json.output.find((item: { type: string }) => item.type === 'function_call');
      expect(call.name).to.equal('transfer_to_refunds');
      return { id: answer.json.id, call };
    }

    it('runs the turn when the whole input is sent again, ending in function_call_output, with tools: []', async () => {
      const { call } = await triage();
      const input = [
        { role: 'user', content: 'I want a refund' },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: HANDOFF_OUTPUT },
      ];
      const answer = await post(harness, '/responses', { input, tools: [] });
      expect(answer.status, JSON.stringify(answer.json)).to.equal(200);
      expect(answer.json.status).to.equal('completed');
      expect(answer.json.output.at(-1).content[0].text).to.equal(SPECIALIST_REPLY);
      expect(lastContext(harness).last).to.deep.include({ role: 'tool', tool_call_id: call.call_id, content: HANDOFF_OUTPUT });
    });

    it('runs the turn when only the function_call_output follows previous_response_id, with no tools', async () => {
      const { id, call } = await triage();
      const answer = await post(harness, '/responses', { previous_response_id: id, input: [{ type: 'function_call_output', call_id: call.call_id, output: HANDOFF_OUTPUT }] });
      expect(answer.status, JSON.stringify(answer.json)).to.equal(200);
      expect(answer.json.output.at(-1).content[0].text).to.equal(SPECIALIST_REPLY);
      expect(lastContext(harness).roles).to.deep.equal(['user', 'assistant', 'tool']);
    });
  });
});
