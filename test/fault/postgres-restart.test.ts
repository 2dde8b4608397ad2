import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { APIError } from 'openai';
import { PrivatePostgres, privatePostgresUnavailable } from '../support/private-postgres.js';
import { startTestService, type TestService } from '../support/service-harness.js';
import { waitFor } from '../support/wait-for.js';
import { sendTurn } from './chat-turn.js';
import { storedTranscript } from './transcript.js';

const SESSIONS = 6;
/** Turns each conversation must have answered after the restart before the load stops. */
const TURNS_AFTER_RESTART = 3;
/** No request may take longer: a hang fails the test instead of stalling it. */
const REQUEST_BOUND_MS = 15_000;
/** These turns are answered slowly, so they are in flight when the server crashes. */
const IN_FLIGHT_AT_CRASH = ['<s0:t2>', '<s1:t2>'];

type Answer = { status: 200; reply: string } | { status: 503 };
type Acknowledged = { user: string; reply: string };

const unavailable = privatePostgresUnavailable();
const suite = unavailable ? describe.skip : describe;

suite(`PostgreSQL crashed and restarted under load${unavailable ? ` (skipped: ${unavailable})` : ''}`, function () {
  this.timeout(60_000);
  let postgres: PrivatePostgres;
  let harness: TestService;

  before(async () => {
    postgres = await PrivatePostgres.create();
    await postgres.start();
    harness = await startTestService({
      env: { DB_URL: postgres.url, DB_POOL_SIZE: '8', SESSIONS_WRITE_WAIT_MS: '300' },
      llmOptions: { pieceDelayMs: 10, rules: IN_FLIGHT_AT_CRASH.map((marker) => ({ match: { lastUserIncludes: marker }, reply: { delayMs: 500 } })) },
    });
  });
  after(async () => {
    await harness?.close();
    await postgres?.destroy();
  });

  /** One turn: streaming through fetch (the SSE is read raw), otherwise through the openai client. */
  async function send(sessionId: string, text: string, stream: boolean): Promise<Answer> {
    const signal = AbortSignal.timeout(REQUEST_BOUND_MS);
    const messages = [{ role: 'user' as const, content: text }];
    if (!stream) {
      try {
        const completion = await harness.client.chat.completions.create({ model: 'svc-agent', messages }, { headers: { 'X-Session-ID': sessionId }, signal });
        return { status: 200, reply: completion.choices[0]!.message.content ?? '' };
      } catch (error) {
        if (!(error instanceof APIError)) throw error;
        expect(error.status, `${text}: ${error.message}`).to.equal(503);
        expect(error.error).to.include({ type: 'server_busy_error', code: 'database_unavailable' });
        return { status: 503 };
      }
    }
    const answer = await sendTurn(harness.baseURL, { text, stream: true, sessionId, signal });
    if (answer.status !== 200) {
      expect(answer.status, `${text}: ${answer.error?.message}`).to.equal(503);
      expect(answer.error).to.include({ type: 'server_busy_error', code: 'database_unavailable' });
      return { status: 503 };
    }
    expect(answer.done, `${text}: the stream did not end with [DONE]`).to.equal(true);
    expect(answer.error, `${text}: an error in the stream`).to.equal(null);
    return { status: 200, reply: answer.content };
  }

  it('stores every acknowledged turn exactly once and in order, and refuses the rest with 503', async () => {
    let restarted = false;
    let refused = 0;
    const afterRestart = new Array<number>(SESSIONS).fill(0);
    const acknowledged: Acknowledged[][] = Array.from({ length: SESSIONS }, () => []);
    const sessionIds = Array.from({ length: SESSIONS }, (_, index) => `restart-${index}-${randomUUID()}`);

    // Each conversation sends its turns one after another; a refused turn is sent again, as a user would.
    const conversation = async (index: number) => {
      for (let turn = 1; afterRestart[index]! < TURNS_AFTER_RESTART; ) {
        const text = `<s${index}:t${turn}> hello from conversation ${index}`;
        const answer = await send(sessionIds[index]!, text, index % 2 === 0);
        if (answer.status === 503) {
          refused += 1;
          await new Promise((resolve) => setTimeout(resolve, 50));
          continue;
        }
        acknowledged[index]!.push({ user: text, reply: answer.reply });
        if (restarted) afterRestart[index]! += 1;
        turn += 1;
      }
    };
    const load = Promise.all(sessionIds.map((_, index) => conversation(index)));

    await Promise.all(IN_FLIGHT_AT_CRASH.map((marker) => harness.llm.waitForRequest((request) => JSON.stringify(request.body.messages).includes(marker))));
    await postgres.stop({ mode: 'immediate' });
    // Down until requests were refused and the turns in flight at the crash were answered.
    await waitFor(
      () => refused >= 3 && acknowledged[0]!.length >= 2 && acknowledged[1]!.length >= 2,
      'refusals during the outage and the answers of the turns in flight',
      REQUEST_BOUND_MS,
    );
    await postgres.start();
    restarted = true;
    await load;
    await harness.service.writer.flush();

    for (const [index, sessionId] of sessionIds.entries()) {
      const expected = acknowledged[index]!.flatMap((turn) => [`user: ${turn.user}`, `assistant: ${turn.reply}`]);
      expect(await storedTranscript(harness.service.database, sessionId), `conversation ${index}`).to.deep.equal(expected);
    }
    expect(acknowledged[0]![1]!.reply, 'a turn in flight at the crash is answered').to.equal(`Echo: ${IN_FLIGHT_AT_CRASH[0]} hello from conversation 0`);
    expect(refused).to.be.at.least(3);
  });
});
