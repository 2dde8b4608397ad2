import { expect } from 'chai';
import type OpenAI from 'openai';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { lastContext } from '../../support/openai-answers.js';
import { serviceStorageTargets, type StorageTarget } from '../../support/service-storage.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

type Message = OpenAI.Chat.ChatCompletionMessageParam;

const targets = serviceStorageTargets();

/** Sends one chat turn with fetch and returns the reply text and the session id. */
async function chat(
  harness: TestService,
  messages: Message[],
  options: { sessionId?: string; userId?: string } = {},
): Promise<{ status: number; content: string; sessionId: string | null }> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (options.sessionId) headers['X-Session-ID'] = options.sessionId;
  if (options.userId) headers['X-User-ID'] = options.userId;
  const response = await fetch(`${harness.baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages }) });
  const body = (await response.json()) as { choices?: Array<{ message: { content: string } }> };
  return { status: response.status, content: body.choices?.[0]?.message.content ?? '', sessionId: response.headers.get('x-session-id') };
}

function user(content: string): Message {
  return { role: 'user', content };
}

function assistant(content: string): Message {
  return { role: 'assistant', content };
}

/** The stored transcript of a session, oldest first. */
async function transcript(harness: TestService, sessionId: string): Promise<Array<{ role: string; message: string; user_id: string }>> {
  return harness.service.database.db
    .selectFrom('conversations')
    .select(['role', 'message', 'user_id'])
    .where('session_id', '=', sessionId)
    .orderBy('id')
    .execute();
}

for (const target of targets) {
  describe(`sessions and memory (${target.name})`, () => {
    let llm: FakeLlm;
    let storage: Awaited<ReturnType<StorageTarget['prepare']>>;
    let harness: TestService;

    before(async () => {
      llm = await startFakeLlm();
      storage = await target.prepare();
      harness = await startTestService({ llm, env: storage.env });
    });
    after(async () => {
      await harness?.close();
      await storage?.cleanup();
      await llm?.close();
    });
    beforeEach(() => llm.reset());

    it('continues a conversation over several requests with X-Session-ID', async () => {
      const first = await chat(harness, [user('My name is Ada.')]);
      expect(first.status).to.equal(200);
      const sessionId = first.sessionId!;
      const second = await chat(harness, [user('What is my name?')], { sessionId });
      expect(second.sessionId).to.equal(sessionId);
      expect(lastContext(llm)).to.deep.equal([
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'Echo: My name is Ada.' },
        { role: 'user', content: 'What is my name?' },
      ]);
      expect((await transcript(harness, sessionId)).map((row) => `${row.role}:${row.message}`)).to.deep.equal([
        'user:My name is Ada.',
        'assistant:Echo: My name is Ada.',
        'user:What is my name?',
        'assistant:Echo: What is my name?',
      ]);
    });

    it('stores no duplicates when the client resends the whole history without a session id', async () => {
      const history: Message[] = [];
      let sessionId: string | null = null;
      for (const text of ['alpha', 'beta', 'gamma']) {
        history.push(user(text));
        const turn = await chat(harness, history, { userId: 'resender' });
        if (sessionId) expect(turn.sessionId).to.equal(sessionId);
        sessionId = turn.sessionId;
        history.push(assistant(turn.content));
      }
      expect(lastContext(llm).map((message) => message.content)).to.deep.equal([
        'You are a helpful assistant.',
        'alpha',
        'Echo: alpha',
        'beta',
        'Echo: beta',
        'gamma',
      ]);
      const rows = await transcript(harness, sessionId!);
      expect(rows.map((row) => row.message)).to.deep.equal(['alpha', 'Echo: alpha', 'beta', 'Echo: beta', 'gamma', 'Echo: gamma']);
    });

    it('forks into a new session when an earlier turn was edited, leaving the stored transcript untouched', async () => {
      const first = await chat(harness, [user('one')], { userId: 'editor' });
      const second = await chat(harness, [user('one'), assistant(first.content), user('two')], { userId: 'editor' });
      expect(second.sessionId).to.equal(first.sessionId);
      const edited = await chat(harness, [user('ONE (edited)'), assistant(first.content), user('two')], {
        userId: 'editor',
        sessionId: first.sessionId!,
      });
      expect(edited.status).to.equal(200);
      expect(edited.sessionId).to.not.equal(first.sessionId);
      expect((await transcript(harness, first.sessionId!)).map((row) => row.message)).to.deep.equal(['one', 'Echo: one', 'two', 'Echo: two']);
      expect((await transcript(harness, edited.sessionId!)).map((row) => row.message)).to.deep.equal([
        'ONE (edited)',
        'Echo: one',
        'two',
        'Echo: two',
      ]);
    });

    it('refuses a session to another user without calling the LLM or showing its memory', async () => {
      const owner = await chat(harness, [user('secret plans')], { userId: 'owner' });
      const requestsBefore = llm.requests.length;
      const intruder = await chat(harness, [user('what did we say?')], { userId: 'intruder', sessionId: owner.sessionId! });
      expect(intruder.status).to.equal(404);
      expect(intruder.content).to.equal('');
      expect(llm.requests.length).to.equal(requestsBefore);
      const rows = await transcript(harness, owner.sessionId!);
      expect(rows.every((row) => row.user_id === 'owner')).to.equal(true);
      expect(rows).to.have.length(2);
    });

    it('serves two requests for one session one after the other, storing the four messages in order', async () => {
      const start = await chat(harness, [user('start')], { userId: 'racer' });
      const sessionId = start.sessionId!;
      llm.script({ match: { lastUserIncludes: 'slow one' }, reply: { content: 'slow answer', delayMs: 300 } });
      const slow = chat(harness, [user('slow one')], { userId: 'racer', sessionId });
      await llm.waitForRequest((request) => JSON.stringify(request.body.messages).includes('slow one'));
      const fast = chat(harness, [user('fast one')], { userId: 'racer', sessionId });
      expect((await slow).content).to.equal('slow answer');
      expect((await fast).content).to.equal('Echo: fast one');
      const rows = (await transcript(harness, sessionId)).slice(2).map((row) => `${row.role}:${row.message}`);
      expect(rows).to.deep.equal(['user:slow one', 'assistant:slow answer', 'user:fast one', 'assistant:Echo: fast one']);
      // The second turn saw the first one's reply: it ran after it, not beside it.
      expect(lastContext(llm).map((message) => message.content)).to.include('slow answer');
    });

    it('continues a session after the service restarts, from its persisted actor', async () => {
      const first = await chat(harness, [user('Remember the number 42.')], { userId: 'restarter' });
      const sessionId = first.sessionId!;
      const before = await harness.service.database.db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(before.current_state).to.equal('ask_user');
      await harness.close();
      harness = await startTestService({ llm, env: storage.env });
      const requestsBefore = llm.requests.length;
      const second = await chat(harness, [user('Which number?')], { userId: 'restarter', sessionId });
      expect(second.status).to.equal(200);
      // One LLM call for the new turn: restoring the actor repeated nothing.
      expect(llm.requests.length).to.equal(requestsBefore + 1);
      expect(lastContext(llm).map((message) => message.content)).to.include('Remember the number 42.');
      const after = await harness.service.database.db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(after.transitions).to.equal(before.transitions + 2);
    });
  });
}
