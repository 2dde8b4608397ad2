import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import OpenAI from 'openai';
import type { FakeLlm } from '../../../scripts/fake-llm-server.js';
import { lastContext, refusal } from '../../support/openai-answers.js';
import { expectSchema, schemaProblems } from '../../support/openai-schema.js';
import { serviceStorageTargets } from '../../support/service-storage.js';
import { useServiceOn } from '../../support/target-service.js';
import type { TestService } from '../../support/service-harness.js';

type ChatMessage = OpenAI.Chat.ChatCompletionMessageParam;

/** The role and text of each message item (the type, for other items). */
function itemSummary(items: OpenAI.Conversations.ConversationItem[]): string[] {
  return items.map((item) => (item.type === 'message' ? `${item.role}:${item.content.map((part) => ('text' in part ? part.text : '')).join('')}` : item.type));
}

for (const target of serviceStorageTargets()) {
  describe(`the Conversations API (${target.name})`, () => {
    const service = useServiceOn(target);
    let llm: FakeLlm;
    let harness: TestService;
    let client: OpenAI;
    before(() => ({ llm, harness, client } = service));

    /** A client acting as `userId` (X-User-ID). */
    function clientOf(userId: string): OpenAI {
      return new OpenAI({ baseURL: harness.baseURL, apiKey: 'placeholder', maxRetries: 0, defaultHeaders: { 'X-User-ID': userId } });
    }

    /** One chat completion turn naming the session; returns the reply and the session id the service answered with. */
    async function chat(messages: ChatMessage[], sessionId?: string): Promise<{ content: string | null; sessionId: string | null }> {
      const { data, response } = await client.chat.completions
        .create({ model: 'svc-agent', messages }, sessionId ? { headers: { 'X-Session-ID': sessionId } } : {})
        .withResponse();
      return { content: data.choices[0]!.message.content, sessionId: response.headers.get('x-session-id') };
    }

    /** How many rows the table holds. */
    async function rowCount(table: 'sessions' | 'conversations'): Promise<number> {
      const row = await harness.service.database.db.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      return Number(row.n);
    }

    /** A raw request to the service, for bodies the SDK's types would not let through; the error it answers is checked against OpenAI's schema. */
    async function send(method: string, path: string, body?: unknown): Promise<{ status: number; error: { type: string; param: string | null } }> {
      const init: RequestInit = { method, headers: { 'Content-Type': 'application/json' } };
      if (body !== undefined) init.body = JSON.stringify(body);
      const answer = await fetch(`${harness.baseURL}${path}`, init);
      const refused = (await answer.json()) as { error: { type: string; param: string | null } };
      expectSchema('ErrorResponse', refused);
      return { status: answer.status, error: refused.error };
    }

    /** A conversation's items page as the service sends it (the SDK's page object keeps only some of its fields). */
    async function itemsPage(id: string, query = ''): Promise<unknown> {
      return (await fetch(`${harness.baseURL}/conversations/${id}/items${query}`)).json();
    }

    it('creates an empty conversation with no body, retrievable with its id, with no items', async () => {
      const before = Math.floor(Date.now() / 1000);
      const conversation = await client.conversations.create();
      expectSchema('ConversationResource', conversation);
      expect(conversation.id).to.match(/^conv_[0-9a-f]{48}$/);
      expect(conversation).to.deep.include({ object: 'conversation', metadata: {} });
      expect(conversation.created_at).to.be.a('number').within(before - 1, Math.ceil(Date.now() / 1000));
      expect(await client.conversations.retrieve(conversation.id)).to.deep.equal(conversation);
      const items = await client.conversations.items.list(conversation.id);
      expect(items.data).to.deep.equal([]);
      expect(items.has_more).to.equal(false);
      expect(items.last_id).to.equal('');
      // An empty page has no first or last id: null, where OpenAI's schema has only strings.
      expect(schemaProblems('ConversationItemList', await itemsPage(conversation.id))).to.deep.equal(['/first_id must be string, got null', '/last_id must be string, got null']);
    });

    it('creates a conversation with metadata and message items, listing them as items with input_text or output_text parts', async () => {
      const conversation = await client.conversations.create({
        metadata: { topic: 'onboarding', ticket: '42' },
        items: [
          { type: 'message', role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hello!' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hi, ' }, { type: 'output_text', text: 'how can I help?' }] } as OpenAI.Responses.ResponseInputItem,
          { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Use metric units.' }] },
        ],
      });
      expect(conversation.metadata).to.deep.equal({ topic: 'onboarding', ticket: '42' });
      expect((await client.conversations.retrieve(conversation.id)).metadata).to.deep.equal({ topic: 'onboarding', ticket: '42' });
      const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
      expect(itemSummary(items.data)).to.deep.equal(['system:Be brief.', 'user:Hello!', 'assistant:Hi, how can I help?', 'developer:Use metric units.']);
      expect(items.data.every((item) => item.type === 'message' && item.status === 'completed' && /^msg_\d+$/.test(item.id))).to.equal(true);
      expect((items.data[1] as OpenAI.Conversations.Message).content).to.deep.equal([{ type: 'input_text', text: 'Hello!' }]);
      expect((items.data[2] as OpenAI.Conversations.Message).content[0]).to.deep.include({ type: 'output_text', text: 'Hi, how can I help?', annotations: [] });
      const page = await itemsPage(conversation.id, '?order=asc');
      expectSchema('ConversationItemList', page);
      expect(page).to.deep.include({ object: 'list', first_id: items.data[0]!.id, last_id: items.data[3]!.id, has_more: false });
    });

    it('replaces the metadata with update, keeps it across a chat turn, and clears it with null', async () => {
      const conversation = await client.conversations.create({ metadata: { a: '1' } });
      const updated = await client.conversations.update(conversation.id, { metadata: { b: '2', c: '3' } });
      expectSchema('ConversationResource', updated);
      expect(updated).to.deep.equal({ ...conversation, metadata: { b: '2', c: '3' } });
      await chat([{ role: 'user', content: 'a turn in between' }], conversation.id);
      expect((await client.conversations.retrieve(conversation.id)).metadata).to.deep.equal({ b: '2', c: '3' });
      expect((await client.conversations.update(conversation.id, { metadata: null })).metadata).to.deep.equal({});
      expect((await client.conversations.retrieve(conversation.id)).metadata).to.deep.equal({});
    });

    it('pages items newest first by default and oldest first with order asc, each page continuing after the last id', async () => {
      const texts = ['one', 'two', 'three', 'four', 'five'];
      const { id } = await client.conversations.create({ items: texts.map((text, index) => ({ role: index % 2 === 0 ? ('user' as const) : ('assistant' as const), content: text })) });
      const texted = (page: { data: OpenAI.Conversations.ConversationItem[] }) => itemSummary(page.data).map((entry) => entry.split(':')[1]);

      const newest = await client.conversations.items.list(id, { limit: 2 });
      expect(texted(newest)).to.deep.equal(['five', 'four']);
      expect(newest.has_more).to.equal(true);
      const older = await client.conversations.items.list(id, { limit: 2, after: newest.last_id });
      expect(texted(older)).to.deep.equal(['three', 'two']);
      const oldest = await client.conversations.items.list(id, { limit: 2, after: older.last_id });
      expect(texted(oldest)).to.deep.equal(['one']);
      expect(oldest.has_more).to.equal(false);

      const ascending = await client.conversations.items.list(id, { limit: 2, order: 'asc' });
      expect(texted(ascending)).to.deep.equal(['one', 'two']);
      expect(texted(await client.conversations.items.list(id, { limit: 2, order: 'asc', after: ascending.last_id }))).to.deep.equal(['three', 'four']);

      // The SDK's own pagination walks every page with `after`.
      const walked: string[] = [];
      for await (const item of client.conversations.items.list(id, { limit: 2, order: 'asc', include: ['message.output_text.logprobs'] })) walked.push(itemSummary([item])[0]!.split(':')[1]!);
      expect(walked).to.deep.equal(texts);
    });

    it('deletes a conversation as DELETE /v1/agents does: its transcript goes, and every route then answers 404', async () => {
      const { id } = await client.conversations.create({ items: [{ role: 'user', content: 'to be forgotten' }] });
      await chat([{ role: 'user', content: 'and this too' }], id);
      const deleted = await client.conversations.delete(id);
      expectSchema('DeletedConversationResource', deleted);
      expect(deleted).to.deep.equal({ id, object: 'conversation.deleted', deleted: true });

      const gone = { status: 404, type: 'not_found_error', param: null, message: `Conversation with id '${id}' not found.` };
      expect(await refusal(client.conversations.retrieve(id))).to.deep.equal(gone);
      expect(await refusal(client.conversations.items.list(id))).to.deep.equal(gone);
      expect(await refusal(client.conversations.update(id, { metadata: { late: 'yes' } }))).to.deep.equal(gone);
      expect(await refusal(client.conversations.delete(id))).to.deep.equal(gone);
      const transcript = await harness.service.database.db.selectFrom('conversations').select('id').where('session_id', '=', id).execute();
      expect(transcript).to.deep.equal([]);
      const session = await harness.service.database.db.selectFrom('sessions').select(['deleted_at', 'snapshot']).where('session_id', '=', id).executeTakeFirstOrThrow();
      expect(session.deleted_at).to.be.instanceOf(Date);
      expect(session.snapshot).to.equal(null);
      // Like a deleted agent, it cannot be continued.
      expect(await refusal(chat([{ role: 'user', content: 'still there?' }], id))).to.deep.include({ status: 410 });
    });

    it("answers 404 to every route for another user's or an unknown conversation, and leaves it untouched", async () => {
      const alice = clientOf('alice');
      const bob = clientOf('bob');
      const hers = await alice.conversations.create({ metadata: { owner: 'alice' }, items: [{ role: 'user', content: 'my secret' }] });
      for (const id of [hers.id, 'conv_unknown']) {
        const notFound = { status: 404, type: 'not_found_error', param: null, message: `Conversation with id '${id}' not found.` };
        expect(await refusal(bob.conversations.retrieve(id))).to.deep.equal(notFound);
        expect(await refusal(bob.conversations.update(id, { metadata: { owner: 'bob' } }))).to.deep.equal(notFound);
        expect(await refusal(bob.conversations.items.list(id))).to.deep.equal(notFound);
        expect(await refusal(bob.conversations.delete(id))).to.deep.equal(notFound);
      }
      expect(await alice.conversations.retrieve(hers.id)).to.deep.equal(hers);
      expect(itemSummary((await alice.conversations.items.list(hers.id)).data)).to.deep.equal(['user:my secret']);
    });

    it('refuses bad input with a 400 naming the param, and stores or changes nothing for it', async () => {
      const { id } = await client.conversations.create({ metadata: { kept: 'yes' } });
      const sessionsBefore = await rowCount('sessions');
      const recordsBefore = await rowCount('conversations');
      const tooMany = Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`key${index}`, 'v']));
      const message = (content: unknown) => ({ type: 'message', role: 'user', content });
      const cases: Array<[string, string, unknown, string]> = [
        ['POST', '/conversations', { metadata: tooMany }, 'metadata'],
        ['POST', '/conversations', { metadata: { ['k'.repeat(65)]: 'v' } }, `metadata.${'k'.repeat(65)}`],
        ['POST', '/conversations', { metadata: { note: 'v'.repeat(513) } }, 'metadata.note'],
        ['POST', '/conversations', { metadata: { note: 'a\u0000b' } }, 'metadata.note'],
        ['POST', '/conversations', { items: [message('a'), message('b'), { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }] }, 'items[2].type'],
        ['POST', '/conversations', { items: [{ role: 'tool', content: 'x' }] }, 'items[0].role'],
        ['POST', '/conversations', { items: [message([{ type: 'input_image', image_url: 'https://example.com/a.png' }])] }, 'items[0].content[0].type'],
        ['POST', '/conversations', { items: [message(42)] }, 'items[0].content'],
        ['POST', '/conversations', { items: [message('a\u0000b')] }, 'items[0].content'],
        ['POST', '/conversations', { items: Array.from({ length: 21 }, () => message('x')) }, 'items'],
        ['POST', `/conversations/${id}`, { metadata: tooMany }, 'metadata'],
        ['POST', `/conversations/${id}`, { metadata: { kept: 'a\u0000b' } }, 'metadata.kept'],
        ['POST', `/conversations/${id}`, {}, 'metadata'],
        ['GET', `/conversations/${id}/items?limit=0`, undefined, 'limit'],
        ['GET', `/conversations/${id}/items?limit=101`, undefined, 'limit'],
        ['GET', `/conversations/${id}/items?limit=ten`, undefined, 'limit'],
        ['GET', `/conversations/${id}/items?order=up`, undefined, 'order'],
        ['GET', `/conversations/${id}/items?after=bogus`, undefined, 'after'],
        ['GET', `/conversations/${id}/items?after=msg_x`, undefined, 'after'],
        ['GET', `/conversations/${id}/items?after=msg_1&after=msg_2`, undefined, 'after'],
      ];
      for (const [method, path, body, param] of cases) {
        const answer = await send(method, path, body);
        const label = `${method} ${path} ${JSON.stringify(body)}`;
        expect(answer.status, label).to.equal(400);
        expect(answer.error, label).to.include({ type: 'invalid_request_error', param });
      }
      expect(await rowCount('sessions')).to.equal(sessionsBefore);
      expect(await rowCount('conversations')).to.equal(recordsBefore);
      expect((await client.conversations.retrieve(id)).metadata).to.deep.equal({ kept: 'yes' });
    });

    it('shows a session made by chat completions as a conversation, its tool calls as function_call and function_call_output items', async () => {
      const sessionId = `chat-${randomUUID()}`;
      const history: ChatMessage[] = [{ role: 'user', content: 'Hello there' }];
      history.push({ role: 'assistant', content: (await chat(history, sessionId)).content });
      const weatherTool: OpenAI.Chat.ChatCompletionTool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
      llm.script({ match: { lastUserIncludes: 'Paris' }, reply: { toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: { city: 'Paris' } }] }, times: 1 });
      history.push({ role: 'user', content: 'Weather in Paris?' });
      const named = { headers: { 'X-Session-ID': sessionId } };
      const first = await client.chat.completions.create({ model: 'svc-agent', messages: history, tools: [weatherTool] }, named);
      // The client resends the whole history with its tool's result, as the chat format asks.
      history.push(first.choices[0]!.message as ChatMessage, { role: 'tool', tool_call_id: 'call_w1', content: 'sunny, 21°C' });
      await client.chat.completions.create({ model: 'svc-agent', messages: history, tools: [weatherTool] }, named);

      const conversation = await client.conversations.retrieve(sessionId);
      expect(conversation).to.deep.include({ id: sessionId, object: 'conversation', metadata: {} });
      const items = (await client.conversations.items.list(sessionId, { order: 'asc' })).data;
      expectSchema('ConversationItemList', await itemsPage(sessionId, '?order=asc'));
      expect(itemSummary(items.slice(0, 3))).to.deep.equal(['user:Hello there', 'assistant:Echo: Hello there', 'user:Weather in Paris?']);
      const call = items.find((item) => item.type === 'function_call');
      expect(call).to.deep.include({ call_id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' });
      expect(call!.id).to.match(/^fc_\d+$/);
      const output = items.find((item) => item.type === 'function_call_output');
      expect(output).to.deep.include({ call_id: 'call_w1', output: 'sunny, 21°C', status: 'completed' });
      expect(output!.id).to.match(/^fco_\d+$/);
      expect(items.indexOf(call!)).to.be.below(items.indexOf(output!));
      expect(itemSummary([items.at(-1)!])).to.deep.equal(['assistant:Tool result: sunny, 21°C']);
    });

    it("sends a conversation's starting items to the LLM when a chat completion names it, and lists the turn after them", async () => {
      const { id } = await client.conversations.create({
        items: [
          { role: 'system', content: 'Answer in one word.' },
          { role: 'user', content: 'My name is Ada.' },
          { role: 'assistant', content: 'Noted, Ada.' },
        ],
      });
      const turn = await chat([{ role: 'user', content: 'What is my name?' }], id);
      expect(turn).to.deep.equal({ content: 'Echo: What is my name?', sessionId: id });
      expect(lastContext(llm)).to.deep.equal([
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'system', content: 'Answer in one word.' },
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'Noted, Ada.' },
        { role: 'user', content: 'What is my name?' },
      ]);
      const items = await client.conversations.items.list(id, { order: 'asc' });
      expect(itemSummary(items.data)).to.deep.equal(['system:Answer in one word.', 'user:My name is Ada.', 'assistant:Noted, Ada.', 'user:What is my name?', 'assistant:Echo: What is my name?']);
    });

    it("recognises a conversation's starting items when a client resends them as its history without naming the session", async () => {
      const userId = `resender-${randomUUID()}`;
      const { id } = await clientOf(userId).conversations.create({
        items: [
          { role: 'user', content: 'Remember the number 7.' },
          { role: 'assistant', content: 'I will remember 7.' },
        ],
      });
      const answer = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-User-ID': userId },
        body: JSON.stringify({
          messages: [
            { role: 'user', content: 'Remember the number 7.' },
            { role: 'assistant', content: 'I will remember 7.' },
            { role: 'user', content: 'Which number?' },
          ],
        }),
      });
      expect(answer.status).to.equal(200);
      expect(answer.headers.get('x-session-id')).to.equal(id);
      const items = await clientOf(userId).conversations.items.list(id, { order: 'asc' });
      expect(itemSummary(items.data)).to.deep.equal(['user:Remember the number 7.', 'assistant:I will remember 7.', 'user:Which number?', 'assistant:Echo: Which number?']);
    });

    it('adds responses to a conversation: each turn continues it, the response names it, and its items list every turn', async () => {
      const userId = `responder-${randomUUID()}`;
      const user = clientOf(userId);
      const { id } = await user.conversations.create({ items: [{ role: 'user', content: 'My name is Ada.' }, { role: 'assistant', content: 'Hello Ada.' }] });
      const first = await user.responses.create({ model: 'svc-agent', input: 'What is my name?', conversation: id });
      expectSchema('Response', first);
      expect(first.conversation).to.deep.equal({ id });
      expect(first.previous_response_id).to.equal(null);
      expect(lastContext(llm).slice(1)).to.deep.equal([
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'Hello Ada.' },
        { role: 'user', content: 'What is my name?' },
      ]);
      const second = await user.responses.create({ model: 'svc-agent', input: 'Thanks', conversation: { id } });
      expect(second.conversation).to.deep.equal({ id });
      expect(lastContext(llm).slice(1).map((message) => message.content)).to.deep.equal(['My name is Ada.', 'Hello Ada.', 'What is my name?', 'Echo: What is my name?', 'Thanks']);
      const items = await user.conversations.items.list(id, { order: 'asc' });
      expect(itemSummary(items.data)).to.deep.equal([
        'user:My name is Ada.',
        'assistant:Hello Ada.',
        'user:What is my name?',
        'assistant:Echo: What is my name?',
        'user:Thanks',
        'assistant:Echo: Thanks',
      ]);
      const stored = await harness.service.database.db.selectFrom('responses').select(['id', 'session_id', 'previous_response_id']).where('id', 'in', [first.id, second.id]).orderBy('created_at').execute();
      // The second follows the first in the response chain, so a branch from either rebuilds the history before it.
      expect(stored).to.deep.equal([
        { id: first.id, session_id: id, previous_response_id: null },
        { id: second.id, session_id: id, previous_response_id: first.id },
      ]);
      // previous_response_id from the conversation's newest response goes on in the same conversation.
      const third = await user.responses.create({ model: 'svc-agent', input: 'Once more', previous_response_id: second.id });
      const row = await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', third.id).executeTakeFirstOrThrow();
      expect(row.session_id).to.equal(id);
    });

    it('continues a chat completions session as a conversation of the Responses API, and the other way round', async () => {
      const sessionId = `chat-${randomUUID()}`;
      await chat([{ role: 'user', content: 'First by chat' }], sessionId);
      const response = await client.responses.create({ model: 'svc-agent', input: 'Then by responses', conversation: sessionId });
      expect(lastContext(llm).slice(1).map((message) => message.content)).to.deep.equal(['First by chat', 'Echo: First by chat', 'Then by responses']);
      expect(response.output_text).to.equal('Echo: Then by responses');
      await chat([{ role: 'user', content: 'And chat again' }], sessionId);
      expect(lastContext(llm).slice(1).map((message) => message.content)).to.deep.equal([
        'First by chat',
        'Echo: First by chat',
        'Then by responses',
        'Echo: Then by responses',
        'And chat again',
      ]);
    });

    it('refuses a response naming an unknown, deleted or other user\'s conversation (404) or both a conversation and previous_response_id (400), storing nothing', async () => {
      const owner = clientOf(`owner-${randomUUID()}`);
      const { id } = await owner.conversations.create({});
      const deleted = await owner.conversations.create({});
      await owner.conversations.delete(deleted.id);
      const earlier = await owner.responses.create({ model: 'svc-agent', input: 'hello' });
      const before = { sessions: await rowCount('sessions'), conversations: await rowCount('conversations') };
      const stranger = clientOf(`stranger-${randomUUID()}`);
      for (const [who, conversation] of [
        [stranger, id],
        [owner, deleted.id],
        [owner, 'conv_unknown'],
      ] as const) {
        expect(await refusal(who.responses.create({ model: 'svc-agent', input: 'hi', conversation }))).to.deep.include({ status: 404, param: 'conversation', message: `Conversation with id '${conversation}' not found.` });
      }
      expect(await refusal(owner.responses.create({ model: 'svc-agent', input: 'hi', conversation: id, previous_response_id: earlier.id }))).to.deep.include({ status: 400, param: 'conversation' });
      expect({ sessions: await rowCount('sessions'), conversations: await rowCount('conversations') }).to.deep.equal(before);
      expect(llm.requests.filter((request) => request.kind === 'chat')).to.have.length(1);
    });
  });
}
