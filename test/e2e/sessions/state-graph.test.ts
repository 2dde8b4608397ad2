import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type OpenAI from 'openai';
import { useEverythingService } from '../../support/everything-service.js';
import { expectSchema } from '../../support/openai-schema.js';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';

const PLAN_GRAPH = new URL('../../../config/examples/plan-then-answer.yaml', import.meta.url).pathname;
const TRIAGE_GRAPH = new URL('../../../config/examples/triage.yaml', import.meta.url).pathname;

const PLAN_TEXT = 'Plan: 1. find the reset page 2. list the steps';

type LlmMessage = { role: string; content?: unknown; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>; tool_call_id?: string };

/** The chat requests the scripted LLM received, oldest first. */
function chatRequests(harness: TestService) {
  return harness.llm.requests.filter((request) => request.kind === 'chat').map((request) => request.body as { messages: LlmMessage[]; tools?: Array<{ function: { name: string; description?: string } }> });
}

function systemText(messages: LlmMessage[]): string {
  return messages.filter((message) => message.role === 'system').map((message) => String(message.content)).join('\n');
}

async function transcript(harness: TestService, sessionId: string): Promise<Array<[string, string]>> {
  const rows = await harness.service.database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
  return rows.map((row) => [row.role, row.message]);
}

async function transitions(harness: TestService, sessionId: string): Promise<string[]> {
  const rows = await harness.service.database.db
    .selectFrom('session_transitions')
    .select(['from_state', 'to_state', 'reason'])
    .where('session_id', '=', sessionId)
    .orderBy('id')
    .execute();
  return rows.map((row) => `${row.from_state}>${row.to_state}:${row.reason}`);
}

/** One streamed chat turn through the HTTP API: the content pieces joined and the session. */
async function streamChat(harness: TestService, text: string, sessionId?: string): Promise<{ content: string; sessionId: string }> {
  const response = await fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(sessionId ? { 'X-Session-ID': sessionId } : {}) },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }], stream: true }),
  });
  const events = sseData(await readText(response));
  expect(events.at(-1)).to.equal('[DONE]');
  const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as OpenAI.Chat.ChatCompletionChunk);
  return { content: chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), sessionId: response.headers.get('x-session-id')! };
}

async function chat(harness: TestService, text: string, sessionId?: string): Promise<{ content: string; sessionId: string }> {
  const { data, response } = await harness.client.chat.completions
    .create({ model: 'svc-agent', messages: [{ role: 'user', content: text }] }, sessionId ? { headers: { 'X-Session-ID': sessionId } } : {})
    .withResponse();
  return { content: data.choices[0]!.message.content ?? '', sessionId: response.headers.get('x-session-id')! };
}

describe('state graph: a private planning step (config/examples/plan-then-answer.yaml)', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService({ env: { STATE_GRAPH_PATH: PLAN_GRAPH } });
  });
  after(() => harness?.close());
  beforeEach(() => {
    harness.llm.reset();
    // The planning state's prompt asks for a plan: the scripted model writes one there.
    harness.llm.script({ match: { systemIncludes: 'write a short numbered plan' }, reply: { content: PLAN_TEXT } });
  });

  it('keeps the plan out of the reply and puts it in the next call\'s context, storing both with the plan marked', async () => {
    const { content, sessionId } = await chat(harness, 'How do I reset my password?');
    expect(content).to.equal('Echo: How do I reset my password?');

    const [planCall, answerCall] = chatRequests(harness);
    expect(chatRequests(harness)).to.have.length(2);
    expect(planCall!.tools).to.equal(undefined);
    expect(answerCall!.messages.at(-1)).to.deep.equal({ role: 'assistant', content: PLAN_TEXT });
    expect(systemText(answerCall!.messages)).to.include('following the plan above').and.not.include('write a short numbered plan');

    expect(await transcript(harness, sessionId)).to.deep.equal([
      ['user', 'How do I reset my password?'],
      ['assistant_private', PLAN_TEXT],
      ['assistant', 'Echo: How do I reset my password?'],
    ]);
    expect(await transitions(harness, sessionId)).to.deep.equal(['ask_user>plan:user_message', 'plan>answer:handoff', 'answer>ask_user:reply']);
  });

  it('streams only the reply\'s text to a streaming client', async () => {
    const { content, sessionId } = await streamChat(harness, 'Stream it please');
    expect(content).to.equal('Echo: Stream it please');
    expect((await transcript(harness, sessionId)).map(([role]) => role)).to.deep.equal(['user', 'assistant_private', 'assistant']);
  });

  it('leaves an earlier turn\'s plan out of later contexts, and continues the session the client holds', async () => {
    const first = await chat(harness, 'first question');
    harness.llm.reset();
    harness.llm.script({ match: { systemIncludes: 'write a short numbered plan' }, reply: { content: 'Plan: second' } });
    // The client resends the history it holds: the plan was never in it.
    const { data, response } = await harness.client.chat.completions
      .create({
        model: 'svc-agent',
        messages: [
          { role: 'user', content: 'first question' },
          { role: 'assistant', content: first.content },
          { role: 'user', content: 'second question' },
        ],
      })
      .withResponse();
    expect(response.headers.get('x-session-id')).to.equal(first.sessionId);
    expect(data.choices[0]!.message.content).to.equal('Echo: second question');
    const [planCall, answerCall] = chatRequests(harness);
    const texts = (messages: LlmMessage[]) => messages.filter((message) => message.role !== 'system').map((message) => message.content);
    expect(texts(planCall!.messages)).to.deep.equal(['first question', 'Echo: first question', 'second question']);
    expect(texts(answerCall!.messages)).to.deep.equal(['first question', 'Echo: first question', 'second question', 'Plan: second']);
  });

  it('answers the Responses API with the reply alone and lists the plan as a reasoning item of the conversation', async () => {
    const { data: response, response: http } = await harness.client.responses.create({ model: 'svc-agent', input: 'Which plan?' }).withResponse();
    expect(response.output_text).to.equal('Echo: Which plan?');
    expect(response.output.map((item) => item.type)).to.deep.equal(['message']);
    // The session is the conversation the Conversations API shows.
    const sessionId = http.headers.get('x-session-id')!;
    const items = await harness.client.conversations.items.list(sessionId, { order: 'asc' });
    expectSchema('ConversationItemList', await (await fetch(`${harness.baseURL}/conversations/${sessionId}/items?order=asc`)).json());
    const shapes = items.data.map((item) =>
      item.type === 'reasoning' ? ['reasoning', item.content?.[0]?.text] : item.type === 'message' ? [item.role, item.type] : [item.type],
    );
    expect(shapes).to.deep.equal([
      ['user', 'message'],
      ['reasoning', PLAN_TEXT],
      ['assistant', 'message'],
    ]);
  });
});

describe('state graph: triage routed by the model (config/examples/triage.yaml)', () => {
  const service = useEverythingService({ env: { STATE_GRAPH_PATH: TRIAGE_GRAPH } });
  let harness: TestService;
  before(() => {
    harness = service.harness;
  });

  it('offers triage a transfer_to_ tool per specialist, described by its state, and no other tool', async () => {
    await chat(harness, 'hello');
    const [triageCall] = chatRequests(harness);
    expect(triageCall!.tools!.map((tool) => [tool.function.name, tool.function.description])).to.deep.equal([
      ['transfer_to_billing', 'Hand the conversation over to billing: Answers questions about invoices, payments and refunds, and can issue refunds.'],
      ['transfer_to_support', 'Hand the conversation over to support: Solves technical problems step by step.'],
    ]);
  });

  it('answers in triage when the model makes no transfer call', async () => {
    const { content, sessionId } = await chat(harness, 'hello');
    expect(content).to.equal('Echo: hello');
    expect(chatRequests(harness)).to.have.length(1);
    expect(await transitions(harness, sessionId)).to.deep.equal(['ask_user>triage:user_message', 'triage>ask_user:reply']);
  });

  it('routes to billing on the model\'s transfer_to_billing call: billing\'s prompt and tools reach the LLM, the hand-off is a transition', async () => {
    const { content, sessionId } = await streamChat(harness, 'I have a billing question about my invoice');
    expect(content).to.equal('Echo: I have a billing question about my invoice');

    const [triageCall, billingCall] = chatRequests(harness);
    expect(chatRequests(harness)).to.have.length(2);
    expect(systemText(triageCall!.messages)).to.include('You are the front desk');
    expect(systemText(billingCall!.messages)).to.include('You are the billing specialist').and.not.include('You are the front desk');
    const billingTools = billingCall!.tools!.map((tool) => tool.function.name);
    expect(billingTools).to.include('everything__get-sum');
    expect(billingTools.filter((name) => name.startsWith('transfer_to_'))).to.deep.equal([]);
    const [transferCall, transferResult] = billingCall!.messages.slice(-2);
    expect(transferCall!.tool_calls!.map((call) => call.function.name)).to.deep.equal(['transfer_to_billing']);
    expect(transferResult).to.deep.include({ role: 'tool', tool_call_id: transferCall!.tool_calls![0]!.id, content: '{"assistant":"billing"}' });

    expect(await transitions(harness, sessionId)).to.deep.equal([
      'ask_user>triage:user_message',
      'triage>billing:handoff',
      'billing>ask_user:reply',
    ]);
    expect((await transcript(harness, sessionId)).map(([role]) => role)).to.deep.equal(['user', 'tool_call', 'tool', 'assistant']);
  });

  it('keeps what triage says as it hands over out of the stream and the reply, and streams what it says when it answers itself', async () => {
    harness.llm.script({
      match: { systemIncludes: 'You are the front desk', lastUserIncludes: 'charged twice' },
      reply: { content: 'Let me get billing for you.', toolCalls: [{ name: 'transfer_to_billing', arguments: { why: 'ignored' } }] },
    });
    const handedOver = await streamChat(harness, 'I was charged twice');
    expect(handedOver.content).to.equal('Echo: I was charged twice');
    expect(await transcript(harness, handedOver.sessionId)).to.deep.include(['assistant_private', 'Let me get billing for you.']);

    const answered = await streamChat(harness, 'good morning');
    expect(answered.content).to.equal('Echo: good morning');
    expect((await transcript(harness, answered.sessionId)).map(([role]) => role)).to.deep.equal(['user', 'assistant']);
  });

  it('routes by [[transfer:support]] too, and holds billing\'s tool calls for approval as its tool state requires, running them once approved', async () => {
    expect((await chat(harness, 'printer on fire [[transfer:support]]')).content).to.equal('Echo: printer on fire [[transfer:support]]');
    expect(systemText(chatRequests(harness)[1]!.messages)).to.include('You are the support engineer');

    harness.llm.reset();
    const asked = await chat(harness, 'billing: add these [[tool:everything__get-sum {"a":2,"b":3}]]');
    expect(asked.content).to.equal('May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.');
    expect(service.toolCalls).to.deep.equal([]);
    const session = await harness.service.database.db.selectFrom('sessions').select('snapshot').where('session_id', '=', asked.sessionId).executeTakeFirstOrThrow();
    expect((session.snapshot as { pendingApprovals?: Array<{ tool: string }> }).pendingApprovals?.map((request) => request.tool)).to.deep.equal(['get-sum']);

    const approved = await chat(harness, 'yes', asked.sessionId);
    // The results go back to billing, whose calls they are, not through triage again.
    expect((await transitions(harness, asked.sessionId)).slice(3)).to.deep.equal(['ask_user>billing:approval', 'billing>ask_user:reply']);
    const resumed = chatRequests(harness).at(-1)!;
    expect(systemText(resumed.messages)).to.include('You are the billing specialist');
    expect(resumed.messages.at(-1)).to.deep.include({ role: 'tool', content: 'The sum of 2 and 3 is 5.' });
    expect(service.toolCalls.map((call) => call.tool)).to.deep.equal(['get-sum']);
    expect(approved.content).to.equal('Tool result: The sum of 2 and 3 is 5.');
  });
});

describe('state graph: show_output on a step that hands over', () => {
  let folder: string;
  let harness: TestService;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-graph-'));
    const graph = join(folder, 'graph.yaml');
    writeFileSync(
      graph,
      readFileSync(PLAN_GRAPH, 'utf8').replace('    tools: []\n', '    tools: []\n    show_output: true\n'),
    );
    harness = await startTestService({ env: { STATE_GRAPH_PATH: graph } });
  });
  after(async () => {
    await harness?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('puts the step\'s text in the reply and the stream, before the answer, a blank line between', async () => {
    harness.llm.script({ match: { systemIncludes: 'write a short numbered plan' }, reply: { content: PLAN_TEXT } });
    const streamed = await streamChat(harness, 'show me');
    expect(streamed.content).to.equal(`${PLAN_TEXT}\n\nEcho: show me`);
    expect(await transcript(harness, streamed.sessionId)).to.deep.equal([
      ['user', 'show me'],
      ['assistant', `${PLAN_TEXT}\n\nEcho: show me`],
    ]);
  });
});

describe("state graph: a state's tools list is the contract", () => {
  const folder = mkdtempSync(join(tmpdir(), 'svc-tools-list-'));
  const graphFile = join(folder, 'billing.yaml');
  writeFileSync(
      graphFile,
      [
        'initial: ask_user',
        'states:',
        '  ask_user: { description: Waits for the user., type: user, transition: { next: [billing] } }',
        '  billing: { description: Adds up invoices., type: agent, tools: [everything__get-sum], transition: { next: [ask_user, billing_tools] } }',
        '  billing_tools: { description: Runs the billing tools., type: tool, transition: { next: [billing] } }',
      ].join('\n'),
  );
  after(() => rmSync(folder, { recursive: true, force: true }));
  const service = useEverythingService({ env: { STATE_GRAPH_PATH: graphFile } });

  it('describes and offers only the listed tools, and answers a call of any other as an error without running it', async () => {
    const { harness } = service;
    harness.llm.script(
      { match: { hasToolResults: false }, reply: { toolCalls: [{ name: 'everything__get-env', arguments: {} }] }, times: 1 },
      { match: { hasToolResults: true }, reply: (request) => ({ content: `Told: ${JSON.stringify(request.messages.at(-1)?.content)}` }) },
    );
    const { content } = await chat(harness, 'What is in your environment?');
    const [first] = chatRequests(harness);
    expect(first!.tools!.map((tool) => tool.function.name)).to.deep.equal(['everything__get-sum']);
    expect(systemText(first!.messages)).to.include('### everything__get-sum');
    expect(systemText(first!.messages)).to.not.include('everything__get-env');
    // The tool server never ran it: the model was told it is not available.
    expect(service.toolCalls).to.deep.equal([]);
    expect(content).to.include('no tool named \\"everything__get-env\\" is available here');
  });
});

describe('state graph: a tool call where no tool state follows', () => {
  const service = useEverythingService({ env: { STATE_GRAPH_PATH: TRIAGE_GRAPH } });

  it('offers no tool in such a state, answers a call the model makes anyway as an error, and replies', async () => {
    const { harness } = service;
    harness.llm.script(
      { match: { hasToolResults: false }, reply: { toolCalls: [{ name: 'everything__echo', arguments: { message: 'hi' } }] }, times: 1 },
      { match: { hasToolResults: true }, reply: { content: 'I can answer that without tools.' } },
    );
    const { content, sessionId } = await chat(harness, 'Hello there');
    expect(content).to.equal('I can answer that without tools.');
    const [first, second] = chatRequests(harness);
    expect((first!.tools ?? []).map((tool) => tool.function.name).filter((name) => !name.startsWith('transfer_to_'))).to.deep.equal([]);
    expect(systemText(first!.messages)).to.not.include('### everything__');
    const answered = second!.messages.at(-1)!;
    expect(answered.role).to.equal('tool');
    expect(String(answered.content)).to.match(/^Error: no tool can run in this state/);
    expect(service.toolCalls).to.deep.equal([]);
    expect(await transitions(harness, sessionId)).to.include('triage>triage:tool_unavailable');
  });
});
