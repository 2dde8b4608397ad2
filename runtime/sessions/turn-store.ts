import type { EventBus } from '../observability/event-bus.js';
import type { ConversationStore, LeaseFence, NewConversationRecord, NewResponseRecord, SessionProgress, SessionRecord, SessionStart, SessionStore, TurnStepStore } from '../ports.js';
import { databaseUnavailable, ServiceError } from '../service-error.js';
import { EMPTY_HISTORY_HASH, type Turn } from './conversation-history.js';
import type { DurableWriter } from './durable-writer.js';

/** What the turn store is built from. */
export type TurnStoreDeps = {
  conversations: ConversationStore;
  sessions: SessionStore;
  /** Where turns' steps are stored as they complete; without, a turn is stored at its start and its end only. */
  steps?: TurnStepStore;
  writer: DurableWriter;
  events: EventBus;
  /** How long a turn waits for a write to commit before it answers anyway (the write goes on). */
  writeWaitMs: number;
  /** Called when a fenced end-of-turn write found that another process took the session meanwhile. */
  onFenceLost: (sessionId: string) => void;
};

/**
 * What the turn path reads and writes: a session's row and turns. Reads the turn cannot go
 * on without fail it with DATABASE_UNAVAILABLE; writes go through the durable writer, in
 * order per session, retried until they commit.
 */
export class TurnStore {
  constructor(private readonly deps: TurnStoreDeps) {}

  /** The session with this resent history's hash, if the user has one. */
  findByHistoryHash(userId: string, historyHash: string): Promise<SessionRecord | undefined> {
    return this.read('find session by history', () => this.deps.sessions.findByHistoryHash(userId, historyHash));
  }

  /** The user's recent sessions whose first turn was never answered, newest first. */
  unansweredFirstTurns(userId: string, withinMs: number, limit: number): Promise<string[]> {
    return this.read('find unanswered first turns', () => this.deps.sessions.unansweredFirstTurns(userId, EMPTY_HISTORY_HASH, withinMs, limit));
  }

  /** The session's row, created for `userId` if missing; `created` says whether this call made it. */
  claim(sessionId: string, userId: string): Promise<SessionRecord & { created: boolean }> {
    return this.read('claim session', () => this.deps.sessions.claim(sessionId, userId));
  }

  /** The session's last `count` stored turns, oldest first. */
  async recentTurns(sessionId: string, count: number): Promise<Turn[]> {
    const records = await this.read('read recent turns', () => this.deps.conversations.recent(sessionId, count));
    return records.map((record) => ({ role: record.role, content: record.message }));
  }

  /**
   * True when the session's last records are `turns`. Turns of a session alternate and are
   * written one turn at a time, so an identical tail can only be an earlier attempt's commit.
   */
  async isStoredTail(sessionId: string, turns: Turn[]): Promise<boolean> {
    const tail = await this.deps.conversations.recent(sessionId, turns.length);
    return tail.length === turns.length && tail.every((record, index) => record.role === turns[index]!.role && record.message === turns[index]!.content);
  }

  /** As `isStoredTail`, for a turn deciding whether its request is a retry. */
  isRetriedTail(sessionId: string, turns: Turn[]): Promise<boolean> {
    return this.read('read the last turns', () => this.isStoredTail(sessionId, turns));
  }

  /**
   * Stores the end of a turn: its turns, the session's progress and the turn's response (the
   * Responses API's, if any), in one statement, through the durable writer. The turn waits
   * for the commit up to `writeWaitMs`; past that (the reply is already on its way) it ends
   * while the write keeps retrying in order.
   */
  async persistEnd(sessionId: string, turns: Turn[], userId: string, progress: SessionProgress, fence?: LeaseFence, response?: NewResponseRecord): Promise<void> {
    const unstored = this.unstoredRecords(sessionId, userId, turns);
    const write = this.deps.writer.write(sessionId, 'store the reply and the session snapshot', async () => {
      const stored = await this.deps.sessions.completeTurn(sessionId, await unstored(), progress, fence, response);
      // Another process took the session while this write waited (its lease lapsed in a
      // database outage): its snapshot stands, and the actor here is stale.
      if (!stored && fence) this.deps.onFenceLost(sessionId);
    });
    if (turns.length > 0) write.then(() => this.announceWritten(sessionId, userId, turns), () => undefined);
    await this.waitForWrite(write);
  }

  /**
   * Stores the user's turns before anything is answered. They must commit within
   * `writeWaitMs`: otherwise (the database is down) the write is called off and the turn
   * fails with DATABASE_UNAVAILABLE, so that nothing is answered that is not stored. A try
   * already sent may still commit; the client's retry then finds it stored (isStoredTail).
   * With `settled` (a turn that decides approval requests: the session's progress, its
   * snapshot no longer waiting on them), the session row is written in the same statement, so
   * a decided call can never be decided, and run, again, even if this process dies while it
   * runs; a lost `fence` (another process took the session) fails the turn before anything runs.
   */
  async persistBeforeAnswer(sessionId: string, turns: Turn[], userId: string, settled?: { progress: SessionProgress; fence?: LeaseFence }): Promise<void> {
    if (turns.length === 0 && !settled) return;
    const unstored = this.unstoredRecords(sessionId, userId, turns);
    await this.storeBeforeAnswer(sessionId, userId, turns, 'store user turn', async () => {
      const records = await unstored();
      if (settled) return !(await this.deps.sessions.completeTurn(sessionId, records, settled.progress, settled.fence));
      if (records.length > 0) await this.deps.conversations.append(records);
      return false;
    });
  }

  /**
   * Starts a session whose id was made for this turn, before anything is answered, as
   * `persistBeforeAnswer` stores a turn: its row, the user's turns and, with `lease`, its lease,
   * in one write (`SessionStore.start`).
   */
  async persistStart(sessionId: string, turns: Turn[], userId: string, lease?: SessionStart['lease']): Promise<void> {
    const records = turns.map((turn) => ({ userId, sessionId, role: turn.role, message: turn.content }));
    let tries = 0;
    await this.storeBeforeAnswer(sessionId, userId, turns, 'start the session', async () => {
      tries += 1;
      // The write stores all of it or nothing: a retry that finds the row follows a try that committed and only lost its acknowledgement.
      if (tries > 1 && (await this.deps.sessions.get(sessionId))) return false;
      await this.deps.sessions.start({ sessionId, userId, records, ...(lease ? { lease } : {}) });
      return false;
    });
  }

  /**
   * Runs `store` (which says whether the turn's lease was found lost) through the durable
   * writer and waits for it as `persistBeforeAnswer` says.
   */
  private async storeBeforeAnswer(sessionId: string, userId: string, turns: Turn[], operation: string, store: () => Promise<boolean>): Promise<void> {
    let calledOff = false;
    let fenceLost = false;
    const write = this.deps.writer.write(sessionId, operation, async () => {
      if (calledOff) return;
      fenceLost = await store();
    });
    if (!(await this.waitForWrite(write))) {
      calledOff = true;
      throw databaseUnavailable();
    }
    if (turns.length > 0) this.announceWritten(sessionId, userId, turns);
    if (fenceLost) {
      this.deps.onFenceLost(sessionId);
      throw new ServiceError('SESSION_BUSY', `session ${sessionId} was taken over by another process; send the request again`, { headers: { 'Retry-After': '1' } });
    }
  }

  /** Whether turns' steps are stored as they complete. */
  get journals(): boolean {
    return this.deps.steps !== undefined;
  }

  /** The steps an earlier attempt of the session's turn `anchor` stored. */
  loadSteps(sessionId: string, anchor: string): Promise<Map<string, string>> {
    const steps = this.deps.steps;
    return steps ? this.read('read the turn steps', () => steps.load(sessionId, anchor)) : Promise.resolve(new Map());
  }

  /**
   * Stores steps of the session's turn `anchor` through the durable writer, in order with its
   * other writes. What comes next (a tool call) waits for the commit: when it does not come
   * within `writeWaitMs`, the turn fails with DATABASE_UNAVAILABLE rather than run a call no
   * stored step knows of (the write goes on, and a later attempt finds it).
   */
  async persistSteps(sessionId: string, anchor: string, rows: ReadonlyArray<readonly [step: string, body: string]>): Promise<void> {
    const steps = this.deps.steps;
    if (!steps) return;
    // Recorded together, the rows go in one statement of the group commit.
    const record = async () => void (await Promise.all(rows.map(([step, body]) => steps.record(sessionId, anchor, step, body))));
    const write = this.deps.writer.write(sessionId, 'store a turn step', record);
    if (!(await this.waitForWrite(write))) throw databaseUnavailable();
  }

  /** Drops the session's stored steps once its turn is answered, behind its other writes (not waited for). */
  clearSteps(sessionId: string): void {
    const steps = this.deps.steps;
    if (steps) void this.after(sessionId, 'drop the turn steps', () => steps.clear(sessionId)).catch(() => undefined);
  }

  /**
   * The records of `turns` for each try of one write: all of them on the first try; on a
   * retry none if they are the session's stored tail already (an earlier try committed and
   * only its acknowledgement was lost), so a retry never stores them twice.
   */
  private unstoredRecords(sessionId: string, userId: string, turns: Turn[]): () => Promise<NewConversationRecord[]> {
    const records = turns.map((turn) => ({ userId, sessionId, role: turn.role, message: turn.content }));
    let tries = 0;
    return async () => {
      tries += 1;
      return tries > 1 && turns.length > 0 && (await this.isStoredTail(sessionId, turns)) ? [] : records;
    };
  }

  private announceWritten(sessionId: string, userId: string, turns: Turn[]): void {
    this.deps.events.emit('memory:written', { sessionId, userId, entries: turns.length, kind: 'conversation' });
  }

  /** Queues work behind the session's writes (e.g. memory consolidation, ending a session). */
  after<T>(sessionId: string, operation: string, work: () => Promise<T>): Promise<T> {
    return this.deps.writer.write(sessionId, operation, work);
  }

  /**
   * Whether the session's writes queued in this process committed within `writeWaitMs`: only
   * then do its reads show every turn this process ended (a reply still being written is not
   * an abandoned turn).
   */
  settled(sessionId: string): Promise<boolean> {
    return this.waitForWrite(this.after(sessionId, 'settle the queued writes', async () => undefined).catch(() => undefined));
  }

  /**
   * Queues work behind the session's writes, as `after`, and waits for it at most `writeWaitMs`
   * (the work goes on alone past it). Its failure is not the turn's: it never rejects.
   */
  async afterWithin(sessionId: string, operation: string, work: () => Promise<unknown>): Promise<void> {
    await this.waitForWrite(this.after(sessionId, operation, work).catch(() => undefined));
  }

  /**
   * Waits for a write to commit, at most `writeWaitMs` (true: it did); a write still retrying goes on alone.
   * A write that failed for good (the database refused its data) fails the turn: it is never
   * answered as if it were stored.
   */
  private async waitForWrite(write: Promise<unknown>): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), this.deps.writeWaitMs);
    });
    try {
      return await Promise.race([write.then(() => true), deadline]);
    } catch (error) {
      throw new ServiceError('INTERNAL', 'The turn could not be stored, so it was not answered.', { cause: error });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs a read that the turn cannot go on without; a database failure becomes a 503. */
  private async read<T>(operation: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (error instanceof ServiceError) throw error;
      this.deps.events.emit('storage:error', { operation, error: error as Error, attempt: 1, willRetry: false });
      throw databaseUnavailable(error);
    }
  }
}
