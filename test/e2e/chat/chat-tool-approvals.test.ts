import { expect } from 'chai';
import type OpenAI from 'openai';
import { useEverythingService } from '../../support/everything-service.js';
import { readText, sseData, type TestService } from '../../support/service-harness.js';

type Message = OpenAI.Chat.ChatCompletionMessageParam;

const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';
const SUM_QUESTION = 'May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.';
const DENIED = 'Error: the user did not approve this call of get-sum (server everything), so it did not run.';

describe('tool approvals in chat completions (require_approval: [get-sum])', () => {
  const service = useEverythingService({ serverOptions: '    require_approval: [get-sum]\n' });
  let harness: TestService;
  before(() => {
    harness = service.harness;
  });

  /** One non-streaming turn: its reply and its session. */
  async function chat(messages: Message[], sessionId?: string): Promise<{ content: string; finishReason: string; sessionId: string }> {
    const { data, response } = await harness.client.chat.completions
      .create({ model: 'svc-agent', messages }, sessionId ? { headers: { 'X-Session-ID': sessionId } } : {})
      .withResponse();
    return { content: data.choices[0]!.message.content ?? '', finishReason: data.choices[0]!.finish_reason, sessionId: response.headers.get('x-session-id')! };
  }

  /** One streamed turn: its content pieces joined, its finish reason and its session. */
  async function streamChat(messages: Message[], sessionId?: string): Promise<{ content: string; finishReason: string | null; sessionId: string }> {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(sessionId ? { 'X-Session-ID': sessionId } : {}) },
      body: JSON.stringify({ messages, stream: true }),
    });
    const events = sseData(await readText(response));
    expect(events.at(-1)).to.equal('[DONE]');
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as OpenAI.Chat.ChatCompletionChunk);
    return {
      content: chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''),
      finishReason: chunks.at(-1)!.choices[0]!.finish_reason,
      sessionId: response.headers.get('x-session-id')!,
    };
  }

  /** The messages of the LLM's last chat request after the system prompt: role, content and tool calls. */
  function lastLlmDialogue() {
    const request = harness.llm.requests.filter((candidate) => candidate.kind === 'chat').at(-1)!;
    return request.body.messages!.slice(1).map((message) => ({
      role: message.role,
      content: message.content ?? null,
      ...(message.tool_calls ? { tool_calls: (message.tool_calls as Array<{ id: string; function: { name: string; arguments: string } }>).map((call) => ({ id: call.id, ...call.function })) } : {}),
      ...(message.tool_call_id ? { tool_call_id: message.tool_call_id } : {}),
    }));
  }

  async function transcript(sessionId: string): Promise<string[]> {
    const rows = await harness.service.database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
    return rows.map((row) => `${row.role}: ${row.message}`);
  }

  it('asks before a listed tool runs, then runs it when the user approves with a resent history', async () => {
    const asked = await chat([{ role: 'user', content: SUM_REQUEST }]);
    expect(asked).to.include({ content: SUM_QUESTION, finishReason: 'stop' });
    expect(service.toolCalls).to.deep.equal([]);
    expect(harness.llm.requests.filter((request) => request.kind === 'chat')).to.have.length(1);

    const answered = await chat([
      { role: 'user', content: SUM_REQUEST },
      { role: 'assistant', content: asked.content },
      { role: 'user', content: 'Yes!' },
    ]);
    // The resent history is recognised as the session's: no session id needed.
    expect(answered.sessionId).to.equal(asked.sessionId);
    expect(answered.content).to.match(/^Tool result: .*\b5\b/);
    expect(service.toolCalls.map(({ server, tool, outcome }) => ({ server, tool, outcome }))).to.deep.equal([{ server: 'everything', tool: 'get-sum', outcome: 'ok' }]);
    // The LLM gets its call and the result; the answering word is not a message to it.
    const [user, call, result] = lastLlmDialogue();
    expect([user, call]).to.deep.equal([
      { role: 'user', content: SUM_REQUEST },
      { role: 'assistant', content: SUM_QUESTION, tool_calls: [{ id: call!.tool_calls![0]!.id, name: 'everything__get-sum', arguments: '{"a":2,"b":3}' }] },
    ]);
    expect(result).to.include({ role: 'tool', tool_call_id: call!.tool_calls![0]!.id });
    expect(String(result!.content)).to.match(/\b5\b/);
    expect(lastLlmDialogue()).to.have.length(3);

    const rows = await transcript(asked.sessionId);
    expect(rows.map((row) => row.split(':')[0])).to.deep.equal(['user', 'tool_call', 'assistant', 'user', 'tool', 'assistant']);
    expect(rows[2]).to.equal(`assistant: ${SUM_QUESTION}`);
    expect(rows[3]).to.equal('user: Yes!');
  });

  it('tells the LLM the call was refused when the user says no, and the call never runs (streaming, new message only)', async () => {
    const asked = await streamChat([{ role: 'user', content: SUM_REQUEST }]);
    expect(asked).to.include({ content: SUM_QUESTION, finishReason: 'stop' });

    const answered = await streamChat([{ role: 'user', content: 'no' }], asked.sessionId);
    expect(answered.content).to.equal(`Tool result: ${DENIED}`);
    expect(service.toolCalls).to.deep.equal([]);
    const dialogue = lastLlmDialogue();
    expect(dialogue.map((message) => message.role)).to.deep.equal(['user', 'assistant', 'tool']);
    expect(dialogue[2]).to.deep.include({ content: DENIED });
    expect((await transcript(asked.sessionId)).slice(3)).to.deep.equal([
      'user: no',
      `tool: ${JSON.stringify({ tool_call_id: dialogue[1]!.tool_calls![0]!.id, content: DENIED })}`,
      `assistant: Tool result: ${DENIED}`,
    ]);
  });

  it('refuses the call and goes on with a message that is not a plain yes or no', async () => {
    const asked = await chat([{ role: 'user', content: SUM_REQUEST }]);
    const answered = await chat([{ role: 'user', content: 'No, add 7 and 8 instead' }], asked.sessionId);
    expect(answered.content).to.equal('Echo: No, add 7 and 8 instead');
    expect(service.toolCalls).to.deep.equal([]);
    expect(lastLlmDialogue().map(({ role, content }) => ({ role, content }))).to.deep.equal([
      { role: 'user', content: SUM_REQUEST },
      { role: 'assistant', content: SUM_QUESTION },
      { role: 'tool', content: DENIED },
      { role: 'user', content: 'No, add 7 and 8 instead' },
    ]);
  });

  it('asks once: the next message after an answered request is an ordinary one', async () => {
    const asked = await chat([{ role: 'user', content: SUM_REQUEST }]);
    await chat([{ role: 'user', content: 'no' }], asked.sessionId);
    const later = await chat([{ role: 'user', content: 'yes' }], asked.sessionId);
    expect(later.content).to.equal('Echo: yes');
    expect(service.toolCalls).to.deep.equal([]);
  });

  it('asks for several held calls in one question and runs them all on one yes', async () => {
    harness.llm.script({
      match: { lastUserIncludes: 'two sums', hasToolResults: false },
      reply: {
        toolCalls: [
          { id: 'call_one', name: 'everything__get-sum', arguments: { a: 1, b: 2 } },
          { id: 'call_two', name: 'everything__get-sum', arguments: { a: 4, b: 5 } },
        ],
      },
      times: 1,
    });
    const asked = await chat([{ role: 'user', content: 'Do two sums' }]);
    expect(asked.content).to.equal(
      [
        'May I run these tools?',
        '1. get-sum of the server everything with the arguments {"a":1,"b":2}',
        '2. get-sum of the server everything with the arguments {"a":4,"b":5}',
        'Reply yes to run them all, or no.',
      ].join('\n'),
    );
    const answered = await chat([{ role: 'user', content: 'y' }], asked.sessionId);
    expect(answered.content).to.match(/^Tool result: .*\b3\b[\s\S]*\n.*\b9\b/);
    expect(service.toolCalls).to.have.length(2);
    expect(lastLlmDialogue().map((message) => message.tool_call_id ?? message.role)).to.deep.equal(['user', 'assistant', 'call_one', 'call_two']);
  });

  it('runs a tool of the server that is not listed at once', async () => {
    const { content } = await chat([{ role: 'user', content: 'Say [[tool:everything__echo {"message":"hi"}]]' }]);
    expect(content).to.equal('Tool result: Echo: hi');
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['echo']);
  });

  it('runs the calls that need no approval first, then asks for the held call the model makes again', async () => {
    const sum = { id: 'call_sum', name: 'everything__get-sum', arguments: { a: 2, b: 3 } };
    const echo = { id: 'call_echo', name: 'everything__echo', arguments: { message: 'first' } };
    harness.llm.script(
      { match: { lastUserIncludes: 'mixed round', hasToolResults: false }, reply: { content: 'Working.', toolCalls: [sum, echo] }, times: 1 },
      { match: { lastUserIncludes: 'mixed round', hasToolResults: true }, reply: { toolCalls: [{ ...sum, id: 'call_sum_2' }] }, times: 1 },
    );
    const asked = await streamChat([{ role: 'user', content: 'A mixed round' }]);
    expect(asked.content).to.equal(`Working.\n\n${SUM_QUESTION}`);
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['echo']);
    // The held call is the second round's.
    const answered = await chat([{ role: 'user', content: 'ok' }], asked.sessionId);
    expect(answered.content).to.match(/^Tool result: .*\b5\b/);
    expect(lastLlmDialogue().at(-2)!.tool_calls!.map((call) => call.id)).to.deep.equal(['call_sum_2']);
  });

  it('never runs an approved call twice: the turn that ran it is cancelled, and the same answer sent again is an ordinary message', async () => {
    harness.llm.script({ match: { lastUserIncludes: 'cancelled sum', hasToolResults: true }, reply: { hang: true }, times: 1 });
    const asked = await chat([{ role: 'user', content: 'A cancelled sum [[tool:everything__get-sum {"a":1,"b":1}]]' }]);
    const client = new AbortController();
    const answering = fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-ID': asked.sessionId },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'yes' }] }),
      signal: client.signal,
    }).catch(() => undefined);
    // The call ran and the LLM is answering its result: the client goes away.
    await harness.llm.waitForRequest((request) => (request.body.messages ?? []).some((message) => message.role === 'tool'));
    client.abort();
    await answering;
    await harness.llm.waitForAbort();
    expect(service.toolCalls).to.have.length(1);

    const again = await chat([{ role: 'user', content: 'yes' }], asked.sessionId);
    expect(again.content).to.equal('Echo: yes');
    expect(service.toolCalls).to.have.length(1);
  });
});
