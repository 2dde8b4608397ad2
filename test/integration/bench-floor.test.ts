import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import pg from 'pg';
import { createPassthroughApp } from '../../scripts/bench/passthrough-app.js';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';
import { servePgliteOverSocket } from '../support/databases.js';

/** The persisted pass-through the bench measures the service against (its floor), over a scripted LLM and a database. */
describe('the bench floor (persisted pass-through)', () => {
  let llm: FakeLlm;
  let database: { url: string; close(): Promise<void> };
  let pool: pg.Pool;
  let server: Server;
  let closeApp: () => Promise<void>;
  let origin: string;

  before(async () => {
    llm = await startFakeLlm();
    database = await servePgliteOverSocket();
    pool = new pg.Pool({ connectionString: database.url, max: 2 });
    const { app, close } = await createPassthroughApp(new URL(llm.url).origin, { database: pool, historyTurns: 4 });
    closeApp = close;
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await closeApp();
    await pool.end();
    await database.close();
    await llm.close();
  });

  const ask = (session: string, content: string, stream: boolean) =>
    fetch(`${origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': session },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content }], ...(stream ? { stream: true } : {}) }),
    });

  it("sends the LLM the session's last messages between the system prompt and the new one", async () => {
    for (const content of ['one', 'two', 'three']) await (await ask('history', content, false)).json();
    const sent = (await llm.waitForRequest((request) => request.body.messages?.at(-1)?.content === 'three')).body.messages!;
    expect(sent.map((message) => `${message.role}:${String(message.content)}`)).to.deep.equal([
      'system:Be brief.',
      'user:one',
      'assistant:Echo: one',
      'user:two',
      'assistant:Echo: two',
      'user:three',
    ]);
    const fourth = await (await ask('history', 'four', false)).json();
    expect(fourth).to.have.nested.property('choices[0].message.content', 'Echo: four');
    // Four messages of history at most: the oldest exchange is left out.
    const last = (await llm.waitForRequest((request) => request.body.messages?.at(-1)?.content === 'four')).body.messages!;
    expect(last.map((message) => String(message.content))).to.deep.equal(['Be brief.', 'two', 'Echo: two', 'three', 'Echo: three', 'four']);
  });

  it('passes a stream through, ending with one [DONE], and commits the text assembled from its chunks', async () => {
    const response = await ask('stream', 'a streamed answer', true);
    expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
    const frames = (await response.text()).split('\n\n').filter(Boolean);
    expect(frames.at(-1)).to.equal('data: [DONE]');
    expect(frames.filter((frame) => frame === 'data: [DONE]')).to.have.length(1);
    const pieces = frames.slice(0, -1).map((frame) => (JSON.parse(frame.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]!.delta.content ?? '');
    expect(pieces.join('')).to.equal('Echo: a streamed answer');
    const { rows } = await pool.query<{ role: string; message: string }>("select role, message from passthrough_turns where session_id = 'stream' order by id");
    expect(rows).to.deep.equal([
      { role: 'user', message: 'a streamed answer' },
      { role: 'assistant', message: 'Echo: a streamed answer' },
    ]);
  });
});
