import { expect } from 'chai';
import type OpenAI from 'openai';
import { refusal } from '../../support/openai-answers.js';
import { expectSchema } from '../../support/openai-schema.js';
import { useEverythingService } from '../../support/everything-service.js';
import type { TestService } from '../../support/service-harness.js';

type ApprovalRequestItem = OpenAI.Responses.ResponseOutputItem.McpApprovalRequest;
type McpCall = OpenAI.Responses.ResponseOutputItem.McpCall;

const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';
const QUESTION = 'May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.';

describe('tool approvals in the Responses API (require_approval: always)', () => {
  const service = useEverythingService({ serverOptions: '    require_approval: always\n' });
  let harness: TestService;
  let client: OpenAI;
  before(() => {
    harness = service.harness;
    client = harness.client;
  });

  /** A response that ended asking for the sum, with its one approval request and its session. */
  async function askForSum(): Promise<{ response: OpenAI.Responses.Response; request: ApprovalRequestItem; sessionId: string }> {
    const { data: response, response: http } = await client.responses.create({ model: 'svc-agent', input: SUM_REQUEST }).withResponse();
    expectSchema('Response', response);
    const [request] = response.output as ApprovalRequestItem[];
    return { response, request: request!, sessionId: http.headers.get('x-session-id')! };
  }

  /** What is stored: every conversation row and every response. */
  async function storedCounts(): Promise<{ rows: number; responses: number }> {
    const db = harness.service.database.db;
    const rows = await db.selectFrom('conversations').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    const responses = await db.selectFrom('responses').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    return { rows: Number(rows.n), responses: Number(responses.n) };
  }

  /** The messages of the LLM's last chat request after the system prompt, as role and content (and call ids). */
  function lastLlmDialogue() {
    const request = harness.llm.requests.filter((candidate) => candidate.kind === 'chat').at(-1)!;
    return request.body.messages!.slice(1).map((message) => ({
      role: message.role,
      content: message.content ?? null,
      ...(message.tool_calls ? { tool_calls: (message.tool_calls as Array<{ id: string }>).map((call) => call.id) } : {}),
    }));
  }

  it('ends the turn with an mcp_approval_request item, and runs the call and goes on once it is approved with previous_response_id', async () => {
    const { response, request, sessionId } = await askForSum();
    expect(response.status).to.equal('completed');
    expect(response.output).to.have.length(1);
    expect(request.id).to.match(/^mcpr_[0-9a-f]{32}$/);
    expect(request).to.deep.equal({ id: request.id, type: 'mcp_approval_request', server_label: 'everything', name: 'get-sum', arguments: '{"a":2,"b":3}' });
    expect(response.output_text).to.equal('');
    expect(service.toolCalls).to.deep.equal([]);
    expect((await client.responses.retrieve(response.id)).output).to.deep.equal(response.output);

    const { data: approved, response: http } = await client.responses
      .create({ model: 'svc-agent', previous_response_id: response.id, input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: true }] })
      .withResponse();
    expect(http.headers.get('x-session-id')).to.equal(sessionId);
    expectSchema('Response', approved);
    expect(approved.output.map((item) => item.type)).to.deep.equal(['mcp_call', 'message']);
    const call = approved.output[0] as McpCall;
    expect(call).to.include({ status: 'completed', server_label: 'everything', name: 'get-sum', arguments: '{"a":2,"b":3}', approval_request_id: request.id, error: null });
    expect(call.output).to.match(/\b5\b/);
    expect(approved.output_text).to.match(/^Tool result: .*\b5\b/);
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['get-sum']);
    // The LLM is given its call and its result; the question is the reply the call was made in.
    const dialogue = lastLlmDialogue();
    expect(dialogue.slice(0, 2)).to.deep.equal([
      { role: 'user', content: SUM_REQUEST },
      { role: 'assistant', content: QUESTION, tool_calls: [dialogue[1]!.tool_calls![0]] },
    ]);
    expect(dialogue[2]).to.include({ role: 'tool' });
    expect(dialogue).to.have.length(3);
    const inputs = (await client.responses.inputItems.list(approved.id)).data;
    expectSchema('ResponseItemList', await (await fetch(`${harness.baseURL}/responses/${approved.id}/input_items`)).json());
    expect(inputs).to.have.length(1);
    expect(inputs[0]).to.deep.include({ type: 'mcp_approval_response', approval_request_id: request.id, approve: true, reason: null });
    expect(inputs[0]!.id).to.match(/^mcpa_[0-9a-f]{48}$/);
  });

  it('streams the request as an item (not the question as text), then the approved call with its mcp_call events', async () => {
    const asking: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: 'svc-agent', input: SUM_REQUEST, stream: true })) asking.push(event);
    expect(asking.some((event) => event.type === 'response.output_text.delta')).to.equal(false);
    const added = asking.filter((event): event is OpenAI.Responses.ResponseOutputItemAddedEvent => event.type === 'response.output_item.added');
    expect(added.map((event) => event.item.type)).to.deep.equal(['mcp_approval_request']);
    const asked = asking.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(asked.type).to.equal('response.completed');
    const request = asked.response.output[0] as ApprovalRequestItem;
    expect(asked.response.output).to.deep.equal([added[0]!.item]);
    expect((await client.responses.retrieve(asked.response.id)).output).to.deep.equal(asked.response.output);

    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    const answer = { type: 'mcp_approval_response' as const, approval_request_id: request.id, approve: true };
    for await (const event of await client.responses.create({ model: 'svc-agent', previous_response_id: asked.response.id, input: [answer], stream: true })) events.push(event);
    for (const event of [...asking, ...events]) expectSchema('ResponseStreamEvent', event);
    expect(events.map((event) => event.sequence_number)).to.deep.equal(events.map((_, index) => index));
    expect(events.filter((event) => event.type.startsWith('response.mcp_call')).map((event) => event.type)).to.deep.equal([
      'response.mcp_call.in_progress',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.completed',
    ]);
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.response.output.map((item) => item.type)).to.deep.equal(['mcp_call', 'message']);
    expect(completed.response.output[0]).to.include({ approval_request_id: request.id, status: 'completed' });
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['get-sum']);
  });

  it('never runs a refused call and tells the LLM so, with the reason (answered with conversation)', async () => {
    const { request, sessionId } = await askForSum();
    const denied = await client.responses.create({
      model: 'svc-agent',
      conversation: sessionId,
      input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: false, reason: 'Not with these numbers' }],
    });
    const told = 'Error: the user did not approve this call of get-sum (server everything), so it did not run. Their reason: Not with these numbers';
    expect(denied.output.map((item) => item.type)).to.deep.equal(['message']);
    expect(denied.output_text).to.equal(`Tool result: ${told}`);
    expect(service.toolCalls).to.deep.equal([]);
    expect(lastLlmDialogue()[2]).to.deep.equal({ role: 'tool', content: told });
    const rows = await harness.service.database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
    expect(rows.map((row) => row.role)).to.deep.equal(['user', 'tool_call', 'assistant', 'approval', 'tool', 'assistant']);
    expect(JSON.parse(rows[3]!.message)).to.deep.equal({ approval_request_id: request.id, approve: false, reason: 'Not with these numbers' });
    // The Conversations API lists the answer as the item it came as.
    const items = await client.conversations.items.list(sessionId, { order: 'asc' });
    expectSchema('ConversationItemList', await (await fetch(`${harness.baseURL}/conversations/${sessionId}/items?order=asc`)).json());
    expect(items.data[3]).to.deep.include({ type: 'mcp_approval_response', approval_request_id: request.id, approve: false, reason: 'Not with these numbers' });
  });

  it('runs the approved call, then the message sent with the answer goes on', async () => {
    const { response, request } = await askForSum();
    const next = await client.responses.create({
      model: 'svc-agent',
      previous_response_id: response.id,
      input: [
        { type: 'mcp_approval_response', approval_request_id: request.id, approve: true },
        { role: 'user', content: 'And then say thanks' },
      ],
    });
    expect(next.output.map((item) => item.type)).to.deep.equal(['mcp_call', 'message']);
    expect(next.output_text).to.equal('Echo: And then say thanks');
    expect(lastLlmDialogue().map((message) => message.role)).to.deep.equal(['user', 'assistant', 'tool', 'user']);
  });

  it('decides each held call by its own answer, and refuses the one the answers leave out', async () => {
    harness.llm.script({
      match: { lastUserIncludes: 'echo and add', hasToolResults: false },
      reply: {
        content: 'Both, please.',
        toolCalls: [
          { id: 'call_echo', name: 'everything__echo', arguments: { message: 'hi' } },
          { id: 'call_sum', name: 'everything__get-sum', arguments: { a: 2, b: 3 } },
        ],
      },
      times: 1,
    });
    const asked = await client.responses.create({ model: 'svc-agent', input: 'Please echo and add' });
    expect(asked.output.map((item) => item.type)).to.deep.equal(['message', 'mcp_approval_request', 'mcp_approval_request']);
    expect(asked.output_text).to.equal('Both, please.');
    const [echo, sum] = asked.output.slice(1) as ApprovalRequestItem[];
    expect([echo!.name, sum!.name]).to.deep.equal(['echo', 'get-sum']);

    const decided = await client.responses.create({
      model: 'svc-agent',
      previous_response_id: asked.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: echo!.id, approve: true }],
    });
    expect(decided.output.map((item) => item.type)).to.deep.equal(['mcp_call', 'message']);
    expect(decided.output[0]).to.include({ name: 'echo', approval_request_id: echo!.id, output: 'Echo: hi' });
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['echo']);
    const results = lastLlmDialogue().filter((message) => message.role === 'tool');
    expect(results.map((message) => message.content)).to.deep.equal([
      'Echo: hi',
      'Error: the user did not approve this call of get-sum (server everything), so it did not run.',
    ]);
  });

  it('refuses a stale or foreign approval_request_id with a 400 naming it, and stores nothing', async () => {
    const first = await askForSum();
    const other = await askForSum();
    const answer = (id: string) => ({ type: 'mcp_approval_response' as const, approval_request_id: id, approve: true });
    const before = await storedCounts();

    // Another conversation's request.
    const foreign = await refusal(client.responses.create({ model: 'svc-agent', previous_response_id: first.response.id, input: [answer(other.request.id)] }));
    expect(foreign).to.include({ status: 400, type: 'invalid_request_error', param: 'input[0].approval_request_id' });
    expect(foreign.message).to.include(other.request.id);
    // An id nothing ever asked for, after a message; and any id in a response that continues nothing.
    const unknown = await refusal(
      client.responses.create({ model: 'svc-agent', previous_response_id: first.response.id, input: [{ role: 'user', content: 'hi' }, answer('mcpr_0000')] }),
    );
    expect(unknown).to.include({ status: 400, param: 'input[1].approval_request_id' });
    const unanchored = await refusal(client.responses.create({ model: 'svc-agent', input: [answer(first.request.id)] }));
    expect(unanchored).to.include({ status: 400, param: 'input[0].approval_request_id' });
    expect(await storedCounts()).to.deep.equal(before);
    expect(service.toolCalls).to.deep.equal([]);

    // The request still waits, and is answered once; after that its id is stale.
    const approved = await client.responses.create({ model: 'svc-agent', previous_response_id: first.response.id, input: [answer(first.request.id)] });
    expect(approved.output[0]).to.include({ type: 'mcp_call', approval_request_id: first.request.id });
    const afterApproval = await storedCounts();
    const stale = await refusal(client.responses.create({ model: 'svc-agent', previous_response_id: approved.id, input: [answer(first.request.id)] }));
    expect(stale).to.include({ status: 400, param: 'input[0].approval_request_id' });
    expect(await storedCounts()).to.deep.equal(afterApproval);
    expect(service.toolCalls).to.have.length(1);
  });
});
