import { expect } from 'chai';
import OpenAI from 'openai';
import type { FakeLlm } from '../../../scripts/fake-llm-server.js';
import { lastContext, refusal } from '../../support/openai-answers.js';
import { expectSchema } from '../../support/openai-schema.js';
import { serviceStorageTargets } from '../../support/service-storage.js';
import { useServiceOn } from '../../support/target-service.js';
import type { TestService } from '../../support/service-harness.js';

for (const target of serviceStorageTargets()) {
  describe(`the Responses API (${target.name})`, () => {
    const service = useServiceOn(target);
    let llm: FakeLlm;
    let harness: TestService;
    let client: OpenAI;
    before(() => ({ llm, harness, client } = service));

    it('answers responses.create with a completed response whose output_text is the agent reply, stored in the session transcript', async () => {
      const response = await client.responses.create({ model: 'svc-agent', input: 'Hello there', instructions: 'Answer briefly.', metadata: { ticket: '42' } });
      expectSchema('Response', response);
      expect(response).to.include({ object: 'response', status: 'completed', output_text: 'Echo: Hello there', instructions: 'Answer briefly.', previous_response_id: null });
      expect(response.id).to.match(/^resp_[0-9a-f]{48}$/);
      expect(response.metadata).to.deep.equal({ ticket: '42' });
      expect(response.output).to.have.length(1);
      expect(response.output[0]).to.include({ type: 'message', role: 'assistant', status: 'completed' });
      // The instructions come after the agent's own system prompt.
      expect(lastContext(llm)).to.deep.equal([
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'system', content: 'Answer briefly.' },
        { role: 'user', content: 'Hello there' },
      ]);
      const sessions = await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', response.id).execute();
      const rows = await harness.service.database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessions[0]!.session_id).orderBy('id').execute();
      expect(rows).to.deep.equal([
        { role: 'user', message: 'Hello there' },
        { role: 'assistant', message: 'Echo: Hello there' },
      ]);
    });

    it('sends the response as UTF-8 JSON whose Content-Length counts bytes, not characters', async () => {
      const response = await fetch(`${harness.baseURL}/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ input: 'Grüße aus 東京 😀' }) });
      expect(response.headers.get('content-type')).to.equal('application/json; charset=utf-8');
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(Number(response.headers.get('content-length'))).to.equal(bytes.length);
      const body = JSON.parse(bytes.toString('utf8')) as { status: string; output: Array<{ content: Array<{ text: string }> }> };
      expect(body.status).to.equal('completed');
      expect(body.output[0]!.content[0]!.text).to.equal('Echo: Grüße aus 東京 😀');
    });

    it('continues the session of the newest response with previous_response_id, sending the earlier turns as context', async () => {
      const first = await client.responses.create({ model: 'svc-agent', input: 'My name is Ada.' });
      const second = await client.responses.create({ model: 'svc-agent', input: 'What is my name?', previous_response_id: first.id });
      expect(second.previous_response_id).to.equal(first.id);
      expect(second.output_text).to.equal('Echo: What is my name?');
      expect(lastContext(llm).slice(1)).to.deep.equal([
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'Echo: My name is Ada.' },
        { role: 'user', content: 'What is my name?' },
      ]);
      const stored = await harness.service.database.db.selectFrom('responses').select(['id', 'session_id']).where('id', 'in', [first.id, second.id]).execute();
      expect(new Set(stored.map((row) => row.session_id)).size).to.equal(1);
    });

    it('branches from an older response: the new turn sees the history up to it, and the first session is not rewritten', async () => {
      const first = await client.responses.create({ model: 'svc-agent', input: 'one' });
      const second = await client.responses.create({ model: 'svc-agent', input: 'two', previous_response_id: first.id });
      const branch = await client.responses.create({ model: 'svc-agent', input: 'two, told otherwise', previous_response_id: first.id });
      expect(branch.output_text).to.equal('Echo: two, told otherwise');
      expect(lastContext(llm).slice(1)).to.deep.equal([
        { role: 'user', content: 'one' },
        { role: 'assistant', content: 'Echo: one' },
        { role: 'user', content: 'two, told otherwise' },
      ]);
      const sessionOf = async (id: string) => (await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', id).executeTakeFirstOrThrow()).session_id;
      expect(await sessionOf(branch.id)).to.not.equal(await sessionOf(second.id));
      const original = await harness.service.database.db.selectFrom('conversations').select('message').where('session_id', '=', await sessionOf(second.id)).orderBy('id').execute();
      expect(original.map((row) => row.message)).to.deep.equal(['one', 'Echo: one', 'two', 'Echo: two']);
      // The branch continues on its own.
      const after = await client.responses.create({ model: 'svc-agent', input: 'three', previous_response_id: branch.id });
      expect(await sessionOf(after.id)).to.equal(await sessionOf(branch.id));
    });

    it('branches from a response whose session a chat completions turn has moved on since', async () => {
      const first = await client.responses.create({ model: 'svc-agent', input: 'one' });
      const sessionId = (await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', first.id).executeTakeFirstOrThrow()).session_id;
      const chat = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-ID': sessionId },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'two, by chat' }] }),
      });
      expect(chat.status).to.equal(200);
      const branch = await client.responses.create({ model: 'svc-agent', input: 'two, by responses', previous_response_id: first.id });
      expect(lastContext(llm).slice(1)).to.deep.equal([
        { role: 'user', content: 'one' },
        { role: 'assistant', content: 'Echo: one' },
        { role: 'user', content: 'two, by responses' },
      ]);
      const branchSession = (await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', branch.id).executeTakeFirstOrThrow()).session_id;
      expect(branchSession).to.not.equal(sessionId);
    });

    it('continues the newest response once when two requests continue it at the same time: the other branches from it', async () => {
      const first = await client.responses.create({ model: 'svc-agent', input: 'start' });
      llm.script({ match: { lastUserIncludes: 'at once' }, reply: { content: 'slow answer', delayMs: 300 }, times: 2 });
      const [left, right] = await Promise.all(
        ['left at once', 'right at once'].map((input) => client.responses.create({ model: 'svc-agent', input, previous_response_id: first.id })),
      );
      const sessionOf = async (id: string) => (await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', id).executeTakeFirstOrThrow()).session_id;
      const sessions = [await sessionOf(first.id), await sessionOf(left!.id), await sessionOf(right!.id)];
      // One went on in the first session; the other is a session of its own.
      expect(sessions.filter((session) => session === sessions[0])).to.have.length(2);
      expect(new Set(sessions).size).to.equal(2);
      // Each turn's LLM saw the history up to the first response, then its own input only.
      const contexts = llm.requests.filter((request) => request.kind === 'chat').slice(-2).map((request) => request.body.messages!.slice(1).map((message) => String(message.content)));
      expect(contexts.map((context) => context.slice(0, 2))).to.deep.equal([
        ['start', 'Echo: start'],
        ['start', 'Echo: start'],
      ]);
      expect(contexts.map((context) => context.slice(2)).sort()).to.deep.equal([['left at once'], ['right at once']]);
      const transcript = await harness.service.database.db.selectFrom('conversations').select('message').where('session_id', '=', sessions[0]!).orderBy('id').execute();
      expect(transcript).to.have.length(4);
    });

    it('retrieves, lists the input items of, and deletes a response; after the delete it is gone', async () => {
      const created = await client.responses.create({
        model: 'svc-agent',
        input: [
          { role: 'user', content: 'first part' },
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'second part' }] },
        ],
      });
      const retrieved = await client.responses.retrieve(created.id);
      expectSchema('Response', retrieved);
      // The answer was the stored response, serialised once for both.
      expect(retrieved).to.deep.equal(created);
      const items = await client.responses.inputItems.list(created.id, { order: 'asc' });
      expectSchema('ResponseItemList', await (await fetch(`${harness.baseURL}/responses/${created.id}/input_items`)).json());
      expect(items.data.map((item) => (item as { content: Array<{ text: string }> }).content[0]!.text)).to.deep.equal(['first part', 'second part']);
      expect(items.data.every((item) => item.type === 'message' && /^msg_/.test(item.id!))).to.equal(true);
      const newestFirst = await client.responses.inputItems.list(created.id, { limit: 1 });
      expect(newestFirst.data).to.have.length(1);
      expect(newestFirst.has_more).to.equal(true);
      expect((newestFirst.data[0] as { content: Array<{ text: string }> }).content[0]!.text).to.equal('second part');

      // The SDK types the answer as void; OpenAI's is this object.
      const deleted = await fetch(`${harness.baseURL}/responses/${created.id}`, { method: 'DELETE' });
      expect(await deleted.json()).to.deep.equal({ id: created.id, object: 'response', deleted: true });
      expect(await refusal(client.responses.retrieve(created.id))).to.deep.include({ status: 404, type: 'not_found_error' });
      expect(await refusal(client.responses.create({ model: 'svc-agent', input: 'again', previous_response_id: created.id }))).to.deep.include({
        status: 404,
        type: 'not_found_error',
        param: 'previous_response_id',
      });
    });

    it("does not show one user's response to another: retrieve, continue and delete answer 404", async () => {
      const alice = new OpenAI({ baseURL: harness.baseURL, apiKey: 'placeholder', maxRetries: 0, defaultHeaders: { 'X-User-ID': 'alice' } });
      const bob = new OpenAI({ baseURL: harness.baseURL, apiKey: 'placeholder', maxRetries: 0, defaultHeaders: { 'X-User-ID': 'bob' } });
      const hers = await alice.responses.create({ model: 'svc-agent', input: 'my secret' });
      expect(await refusal(bob.responses.retrieve(hers.id))).to.deep.include({ status: 404 });
      expect(await refusal(bob.responses.inputItems.list(hers.id))).to.deep.include({ status: 404 });
      expect(await refusal(bob.responses.create({ model: 'svc-agent', input: 'hi', previous_response_id: hers.id }))).to.deep.include({ status: 404, param: 'previous_response_id' });
      expect(await refusal(bob.responses.delete(hers.id))).to.deep.include({ status: 404 });
      expect((await alice.responses.retrieve(hers.id)).output_text).to.equal('Echo: my secret');
    });

    it('returns a function_call item for a client tool and continues from its function_call_output with previous_response_id', async () => {
      const tools: OpenAI.Responses.FunctionTool[] = [
        { type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false },
      ];
      llm.script({ match: { lastUserIncludes: 'Paris' }, reply: { toolCalls: [{ id: 'call_r1', name: 'get_weather', arguments: { city: 'Paris' } }] }, times: 1 });
      const first = await client.responses.create({ model: 'svc-agent', input: 'Weather in Paris?', tools });
      expectSchema('Response', first);
      expect(first.output).to.have.length(1);
      expect(first.output[0]).to.deep.include({ type: 'function_call', call_id: 'call_r1', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' });
      expect(first.output_text).to.equal('');
      expect(llm.requests.at(-1)!.body.tools).to.deep.equal([
        { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: tools[0]!.parameters, strict: false } },
      ]);

      const second = await client.responses.create({
        model: 'svc-agent',
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: 'call_r1', output: 'sunny, 21°C' }],
        tools,
      });
      expectSchema('Response', second);
      expectSchema('ResponseItemList', await (await fetch(`${harness.baseURL}/responses/${second.id}/input_items`)).json());
      expect(second.output_text).to.equal('Tool result: sunny, 21°C');
      const sent = llm.requests.at(-1)!.body.messages!;
      expect(sent.map((message) => message.role), JSON.stringify(sent)).to.deep.equal(['system', 'user', 'assistant', 'tool']);
      expect(sent[2]!.tool_calls).to.have.length(1);
      // The history was resent to show the call, yet the turn continued the same session.
      const stored = await harness.service.database.db.selectFrom('responses').select('session_id').where('id', 'in', [first.id, second.id]).execute();
      expect(new Set(stored.map((row) => row.session_id)).size).to.equal(1);
    });

    it('resends the calls of one round as one assistant message when the client answers two function calls', async () => {
      const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
      llm.script({
        match: { lastUserIncludes: 'two cities' },
        reply: {
          toolCalls: [
            { id: 'call_a', name: 'get_weather', arguments: { city: 'Rome' } },
            { id: 'call_b', name: 'get_weather', arguments: { city: 'Oslo' } },
          ],
        },
        times: 1,
      });
      const first = await client.responses.create({ model: 'svc-agent', input: 'Weather in two cities?', tools });
      expect(first.output.map((item) => item.type)).to.deep.equal(['function_call', 'function_call']);
      await client.responses.create({
        model: 'svc-agent',
        previous_response_id: first.id,
        input: [
          { type: 'function_call_output', call_id: 'call_a', output: 'warm' },
          { type: 'function_call_output', call_id: 'call_b', output: 'cold' },
        ],
        tools,
      });
      const sent = llm.requests.at(-1)!.body.messages!;
      expect(sent.map((message) => message.role)).to.deep.equal(['system', 'user', 'assistant', 'tool', 'tool']);
      expect((sent[2]!.tool_calls as Array<{ id: string }>).map((call) => call.id)).to.deep.equal(['call_a', 'call_b']);
    });

    it('streams the semantic events in order with increasing sequence numbers, and stores the response before response.completed', async () => {
      const stream = await client.responses.create({ model: 'svc-agent', input: 'stream me please', stream: true });
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      for (const event of events) expectSchema('ResponseStreamEvent', event);
      expect(events.map((event) => event.sequence_number)).to.deep.equal(events.map((_, index) => index));
      const types = events.map((event) => event.type);
      const deltas = types.filter((type) => type === 'response.output_text.delta').length;
      expect(deltas).to.be.greaterThan(1);
      expect(types).to.deep.equal([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        ...Array<string>(deltas).fill('response.output_text.delta'),
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      const text = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : [])).join('');
      expect(text).to.equal('Echo: stream me please');
      const added = events[2] as OpenAI.Responses.ResponseOutputItemAddedEvent;
      const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
      expect(completed.response.status).to.equal('completed');
      expect(completed.response.output[0]!.id).to.equal(added.item.id);
      expect((events[0] as OpenAI.Responses.ResponseCreatedEvent).response.status).to.equal('in_progress');
      const retrieved = await client.responses.retrieve(completed.response.id);
      expect(retrieved.output_text).to.equal('Echo: stream me please');
      expect(retrieved.output[0]!.id).to.equal(added.item.id);
    });

    it("builds the same response with the SDK's responses.stream helper, and streams a client function call's arguments", async () => {
      // The helper builds its response from the events alone (it adds no output_text).
      const helper = client.responses.stream({ model: 'svc-agent', input: 'helper here' });
      const built = await helper.finalResponse();
      expect(built.status).to.equal('completed');
      expect(built.output).to.have.length(1);
      expect((built.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0]).to.include({ type: 'output_text', text: 'Echo: helper here' });

      const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
      llm.script({ reply: { toolCalls: [{ id: 'call_s9', name: 'get_weather', arguments: { city: 'Oslo' } }] }, times: 1 });
      const calls = client.responses.stream({ model: 'svc-agent', input: 'Weather in Oslo?', tools });
      const argumentPieces: string[] = [];
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      calls.on('event', (event) => events.push(event));
      calls.on('response.function_call_arguments.delta', (event) => argumentPieces.push(event.delta));
      const final = await calls.finalResponse();
      for (const event of events) expectSchema('ResponseStreamEvent', event);
      expect(events.map((event) => event.type)).to.include.members(['response.function_call_arguments.done', 'response.output_item.done']);
      expect(final.output).to.have.length(1);
      expect(final.output[0]).to.deep.include({ type: 'function_call', call_id: 'call_s9', name: 'get_weather', arguments: '{"city":"Oslo"}' });
      expect(JSON.parse(argumentPieces.join(''))).to.deep.equal({ city: 'Oslo' });
    });

    it('ends a stream whose LLM call failed with response.failed carrying the error', async () => {
      const stream = await client.responses.create({ model: 'svc-agent', input: 'this fails [[error:503]]', stream: true });
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      for (const event of events) expectSchema('ResponseStreamEvent', event);
      const last = events.at(-1) as OpenAI.Responses.ResponseFailedEvent;
      expect(last.type).to.equal('response.failed');
      expect(last.response.status).to.equal('failed');
      expect(last.response.error).to.include({ code: 'server_error' });
      expect(last.response.error!.message).to.match(/503/);
      const stored = await client.responses.retrieve(last.response.id);
      expectSchema('Response', stored);
      expect(stored).to.deep.include({ status: 'failed', error: last.response.error });
    });

    it('keeps no response with store: false, though the turn is in the transcript', async () => {
      const response = await client.responses.create({ model: 'svc-agent', input: 'forget me', store: false });
      expectSchema('Response', response);
      expect((response as unknown as { store: boolean }).store).to.equal(false);
      expect(await refusal(client.responses.retrieve(response.id))).to.deep.include({ status: 404 });
      const rows = await harness.service.database.db.selectFrom('conversations').select('message').where('message', '=', 'forget me').execute();
      expect(rows).to.have.length(1);
    });

    it('refuses bad input with a 400 naming the field, and stores nothing for it', async () => {
      const before = await harness.service.database.db.selectFrom('conversations').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ model: 'svc-agent' }, 'input'],
        [{ model: 'svc-agent', input: [] }, 'input'],
        [{ model: 'svc-agent', input: [{ role: 'robot', content: 'x' }] }, 'input[0]'],
        [{ model: 'svc-agent', input: 'x', temperature: 3 }, 'temperature'],
        [{ model: 'svc-agent', input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
        [{ model: 'svc-agent', input: 'x', previous_response_id: 42 }, 'previous_response_id'],
        [{ model: 'svc-agent', input: 'x', stream: 'yes' }, 'stream'],
        [{ model: 'svc-agent', input: [{ role: 'user', content: 'a\u0000b' }] }, 'input[0].content'],
        [{ model: 'svc-agent', input: 'x', instructions: 'a\u0000b' }, 'instructions'],
        [{ model: 'svc-agent', input: 'x', metadata: { note: 'a\u0000b' } }, 'metadata.note'],
      ];
      for (const [body, param] of cases) {
        const answer = await fetch(`${harness.baseURL}/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
        expect(answer.status, JSON.stringify(body)).to.equal(400);
        const refused = (await answer.json()) as { error: { type: string; param: string } };
        expectSchema('ErrorResponse', refused);
        const error = refused.error;
        expect(error.type, JSON.stringify(body)).to.equal('invalid_request_error');
        expect(error.param, JSON.stringify(body)).to.match(new RegExp(`^${param.replace(/[[\]]/g, '\\$&')}`));
      }
      const unknown = await refusal(client.responses.create({ model: 'svc-agent', input: 'x', previous_response_id: 'resp_nothing' }));
      expect(unknown).to.deep.include({ status: 404, type: 'not_found_error', param: 'previous_response_id' });
      const after = await harness.service.database.db.selectFrom('conversations').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      expect(Number(after.n)).to.equal(Number(before.n));
    });
  });
}
