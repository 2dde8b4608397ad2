import { expect } from 'chai';
import { FAILED_REPLY_ROLE, LLM_FAILURE_PREFIX } from '../../runtime/sessions/supervisor.js';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../../scripts/fake-llm-server.js';
import { startTestService, type TestService } from '../support/service-harness.js';
import { waitFor } from '../support/wait-for.js';
import { sendTurn, type TurnAnswer } from './chat-turn.js';
import { openFaultDatabase, type FaultDatabase } from './fault-database.js';
import { storedTranscript } from './transcript.js';

/** The service gives up on the LLM after this long: ten times the slow fault's delay, so a loaded machine cannot turn slow into timed out. */
const LLM_TIMEOUT_MS = 3_000;
const REQUEST_BOUND_MS = 10_000;

/** What the scripted LLM does to one turn, by a magic word in the user's message. */
const FAULTS = {
  none: '',
  slow: '[[slow:300]]',
  error: '[[error:503 overloaded]]',
  cut: '[[cut:1]]',
  timeout: `[[slow:${LLM_TIMEOUT_MS * 4}]]`,
  abandoned: '[[hang]]',
} as const;
type Fault = keyof typeof FAULTS;
const FAULT_NAMES = Object.keys(FAULTS) as Fault[];

/** One turn as the client saw it, and the reply the service should have stored (null: none), as `role: message`. */
type Outcome = { text: string; stored: string | null };

describe('LLM server faults under concurrent load', function () {
  this.timeout(60_000);
  let database: FaultDatabase;
  let llm: FakeLlm;
  let harness: TestService;

  before(async () => {
    database = await openFaultDatabase('llm_faults');
    llm = await startFakeLlm({ pieceDelayMs: 5 });
    harness = await startTestService({ llm, env: { ...database.env, LLM_TIMEOUT_MS: String(LLM_TIMEOUT_MS) } });
  });
  after(async () => {
    await harness?.close();
    await llm?.close();
    await database?.drop();
  });

  /** Checks the answer a fault calls for and returns the reply the service should have stored, as `role: message`. */
  function expectAnswer(fault: Fault, text: string, stream: boolean, answer: TurnAnswer): string {
    const label = `${fault} (${stream ? 'streaming' : 'not streaming'}): ${text}`;
    expect(answer.status, label).to.equal(200);
    if (stream) {
      expect(answer.done, `${label}: ends with [DONE]`).to.equal(true);
      expect(answer.error, label).to.equal(null);
    }
    const failure = { error: /^503 overloaded$/, cut: /./, timeout: /did not answer in time/ }[fault as 'error' | 'cut' | 'timeout'];
    if (!failure) {
      expect(answer.content, label).to.equal(`Echo: ${text}`);
      return `assistant: ${answer.content}`;
    }
    // A failed turn's reply is stored marked, so that it never enters a later context.
    if (!stream) {
      expect(answer.content.startsWith(LLM_FAILURE_PREFIX), label).to.equal(true);
      expect(answer.content.slice(LLM_FAILURE_PREFIX.length), label).to.match(failure);
      return `${FAILED_REPLY_ROLE}: ${answer.content}`;
    }
    // The specification's stream: one piece `Error: ...` (the same text as without streaming), then the end (a cut stream first sends what it had).
    const errorPieces = answer.pieces.filter((piece) => piece.startsWith('Error: '));
    expect(errorPieces, label).to.have.length(1);
    expect(answer.pieces.at(-1), label).to.equal(errorPieces[0]);
    expect(errorPieces[0]!.startsWith(LLM_FAILURE_PREFIX), label).to.equal(true);
    expect(errorPieces[0]!.slice(LLM_FAILURE_PREFIX.length), label).to.match(failure);
    if (fault === 'error') expect(answer.pieces, label).to.have.length(1);
    else expect(`Echo: ${text}`.startsWith(answer.pieces.slice(0, -1).join('')), label).to.equal(true);
    // What the client saw is the reply stored: a resent history then matches the stored one.
    return `${FAILED_REPLY_ROLE}: ${answer.pieces.join('')}`;
  }

  /** A conversation whose turns meet every fault in turn, starting at a different one per conversation. */
  async function conversation(index: number, stream: boolean): Promise<{ sessionId: string; outcomes: Outcome[] }> {
    const sessionId = `llm-faults-${index}-${Date.now()}`;
    const outcomes: Outcome[] = [];
    for (let turn = 0; turn < FAULT_NAMES.length; turn += 1) {
      const fault = FAULT_NAMES[(index + turn) % FAULT_NAMES.length]!;
      const text = `<s${index}:t${turn}> tell me about ${fault} ${FAULTS[fault]}`.trimEnd();
      if (fault === 'abandoned') {
        // The client gives up while the LLM still thinks: the service must cancel the upstream call.
        const controller = new AbortController();
        const sent = sendTurn(harness.baseURL, { text, stream, sessionId, signal: controller.signal }).catch((error: Error) => error);
        await llm.waitForRequest((request) => String(request.body.messages?.at(-1)?.content).includes(`<s${index}:t${turn}>`), REQUEST_BOUND_MS);
        controller.abort();
        expect(await sent).to.be.instanceOf(Error);
        outcomes.push({ text, stored: null });
        continue;
      }
      const answer = await sendTurn(harness.baseURL, { text, stream, sessionId, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
      outcomes.push({ text, stored: expectAnswer(fault, text, stream, answer) });
    }
    const last = `<s${index}:end> are you still fine?`;
    const answer = await sendTurn(harness.baseURL, { text: last, stream, sessionId, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
    outcomes.push({ text: last, stored: expectAnswer('none', last, stream, answer) });
    return { sessionId, outcomes };
  }

  it('answers slow, failing, cut, timed-out and abandoned LLM calls as the specification says, each stored once', async () => {
    const conversations = await Promise.all(Array.from({ length: 2 * FAULT_NAMES.length }, (_, index) => conversation(index, index % 2 === 0)));

    const abandoned = conversations.length;
    const isAbandoned = (request: RecordedRequest) => String(request.body.messages?.at(-1)?.content).includes(FAULTS.abandoned);
    await waitFor(() => llm.requests.filter((request) => isAbandoned(request) && request.aborted).length === abandoned, 'every abandoned call to be cancelled upstream');
    await harness.service.writer.flush();
    for (const { sessionId, outcomes } of conversations) {
      const expected = outcomes.flatMap((outcome) => [`user: ${outcome.text}`, ...(outcome.stored === null ? [] : [outcome.stored])]);
      expect(await storedTranscript(harness.service.database, sessionId), sessionId).to.deep.equal(expected);
    }
  });

  it('ends open streams with an Error piece when the LLM server dies, answers with the error text while it is down, and recovers when it is back', async () => {
    llm.setBehaviour({ pieceDelayMs: 150 });
    const streams = Array.from({ length: 4 }, (_, index) =>
      sendTurn(harness.baseURL, { text: `<down:${index}> a long answer please`, stream: true, signal: AbortSignal.timeout(REQUEST_BOUND_MS) }),
    );
    await waitFor(() => llm.requests.filter((request) => String(request.body.messages?.at(-1)?.content).includes('<down:')).length === 4, 'the four streams to reach the LLM');
    const { port } = llm;
    await llm.close();

    for (const answer of await Promise.all(streams)) {
      expect(answer.done).to.equal(true);
      expect(answer.pieces.at(-1)).to.match(/^Error: /);
      expect(answer.pieces.filter((piece) => piece.startsWith('Error: '))).to.have.length(1);
    }
    const whileDown = await sendTurn(harness.baseURL, { text: 'anyone there?', stream: false, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
    expect(whileDown.content).to.match(new RegExp(`^${LLM_FAILURE_PREFIX}cannot reach the LLM server`));

    llm = await startFakeLlm({ port });
    const afterwards = await sendTurn(harness.baseURL, { text: 'back again?', stream: true, sessionId: whileDown.sessionId!, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
    expect(afterwards.content).to.equal('Echo: back again?');
    await harness.service.writer.flush();
    expect(await storedTranscript(harness.service.database, whileDown.sessionId!)).to.deep.equal([
      'user: anyone there?',
      `${FAILED_REPLY_ROLE}: ${whileDown.content}`,
      'user: back again?',
      'assistant: Echo: back again?',
    ]);
  });
});
