import { createActor, type Actor, type InspectionEvent, type Snapshot } from 'xstate';
import { isRestingState, type SessionLimits, type SessionMachine, type StateGraph } from '../../machines/index.js';
import type { ChatMessage } from '../chat-types.js';
import type { EventBus } from '../observability/event-bus.js';
import { FIRST_LEASE_GENERATION, type SessionRecord, type TransitionRecord } from '../ports.js';
import type { Turn } from './conversation-history.js';
import type { SessionLeases } from './session-leases.js';
import { releaseOnce, SessionLocks, type Release } from './session-locks.js';
import type { SessionRegistry } from './session-registry.js';

export type SessionActor = Actor<SessionMachine>;

/**
 * A live session: its actor, its stored row as this process last wrote it, the lease
 * generation of its last turn here (0 without leases), its last `shortTermTurns` stored
 * turns when they were read or written here (undefined: not known, read them when needed),
 * and the stored response its last turn here answered, if that turn was a response's.
 */
export type CachedActor = { actor: SessionActor; session: SessionRecord; lastUsed: number; generation: number; recent?: Turn[]; newestResponseId?: string };

/** A cached session's newest response: where continuing it goes on, with no read. */
export type CachedResponseEnd = { sessionId: string; userId: string; historyHash: string };

/** What the actor cache is built from. */
export type ActorCacheDeps = {
  machine: SessionMachine;
  graph: StateGraph;
  registry: SessionRegistry;
  events: EventBus;
  settings: SessionLimits & { cacheSize: number; idleMs: number; turnWaitMs: number };
  /** Leases that keep turns of a session one at a time across processes (PostgreSQL); none: this process is alone. */
  leases?: SessionLeases;
  /** Receives every session actor's inspection events (the XState inspector). */
  inspect?: (event: InspectionEvent) => void;
  /** True while a turn of the session runs: its actor is not evicted under it. */
  isBusy: (sessionId: string) => boolean;
  /** Told of every transition of a session's actor. */
  onTransition: (sessionId: string, transition: TransitionRecord) => void;
};

/**
 * The session actors this process holds: a bounded cache with idle eviction. A session is
 * held for one turn at a time, in this process (arrival order) and, with leases, across
 * processes; its lease stays held while its actor is cached here and goes back on eviction.
 */
export class ActorCache {
  private readonly cache = new Map<string, CachedActor>();
  /** The session of each cached session's newest response, by response id. */
  private readonly sessionOfResponse = new Map<string, string>();
  private readonly locks = new SessionLocks();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly deps: ActorCacheDeps) {
    this.sweeper = setInterval(() => this.evictIdle(), Math.min(deps.settings.idleMs, 30_000));
    this.sweeper.unref();
  }

  /** Session actors held in memory. */
  get size(): number {
    return this.cache.size;
  }

  get(sessionId: string): CachedActor | undefined {
    return this.cache.get(sessionId);
  }

  /**
   * Holds the session for one turn: first in this process (arrival order), then, with
   * leases, across processes. An actor cached here is dropped when another process ran a
   * turn of the session since this one did (the lease generation moved by more than one):
   * the turn then starts from the stored snapshot, never from a stale one. A session whose id
   * was made for this turn (`fresh`) is held in this process only: its lease is taken by the
   * turn's first write, with its row (`SessionStore.start`, then `SessionLeases.adopt`).
   */
  async hold(sessionId: string, signal?: AbortSignal, fresh = false): Promise<{ release: Release; generation: number }> {
    const waitMs = this.deps.settings.turnWaitMs;
    const started = Date.now();
    const unlock = await this.locks.acquire(sessionId, waitMs, signal);
    const leases = this.deps.leases;
    if (!leases) return { release: unlock, generation: 0 };
    const release = () => {
      leases.release(sessionId);
      unlock();
    };
    // An id made for this turn: no process can know it yet, and the turn's first write takes its lease with its row.
    if (fresh) return { release: releaseOnce(release), generation: FIRST_LEASE_GENERATION };
    let lease;
    try {
      lease = await leases.acquire(sessionId, Math.max(0, waitMs - (Date.now() - started)), signal);
    } catch (error) {
      unlock();
      throw error;
    }
    const cached = this.cache.get(sessionId);
    if (cached && !lease.reused && lease.generation !== cached.generation + 1) this.dropActor(sessionId);
    return { release: releaseOnce(release), generation: lease.generation };
  }

  /**
   * The session's actor: from the cache, restored from its stored snapshot, or new. A new
   * actor whose graph starts in an agent state takes the turn's messages as input and
   * `startsTurn` is true; every other actor is sent the turn as a `user.message`.
   */
  actorFor(session: SessionRecord, userId: string, messages: ChatMessage[], generation: number): { actor: SessionActor; startsTurn: boolean } {
    const cached = this.cache.get(session.sessionId);
    if (cached) {
      this.cache.delete(session.sessionId);
      cached.lastUsed = Date.now();
      cached.generation = generation;
      this.cache.set(session.sessionId, cached);
      return { actor: cached.actor, startsTurn: false };
    }
    const { graph, machine, inspect } = this.deps;
    const startsTurn = !session.snapshot && !isRestingState(graph, graph.initial);
    const { maxToolRounds, maxHandoffs } = this.deps.settings;
    const input = { sessionId: session.sessionId, maxToolRounds, maxHandoffs, ...(startsTurn ? { messages } : {}) };
    const actor = session.snapshot
      ? createActor(machine, { snapshot: withLimits(session.snapshot, { maxToolRounds, maxHandoffs }), input, inspect })
      : createActor(machine, { input, inspect });
    this.observe(actor, session.sessionId, userId);
    this.cache.set(session.sessionId, { actor, session, lastUsed: Date.now(), generation });
    this.evictOverflow();
    return { actor, startsTurn };
  }

  /**
   * Keeps the row a finished turn wrote, its last turns when known, and the response it
   * stored (its id: the turn was a stored response's), beside the cached actor.
   */
  remember(sessionId: string, session: SessionRecord, recent: Turn[] | undefined, responseId?: string): void {
    const cached = this.cache.get(sessionId);
    if (!cached) return;
    cached.session = session;
    cached.recent = recent;
    this.forgetResponse(cached);
    if (responseId === undefined) return;
    cached.newestResponseId = responseId;
    this.sessionOfResponse.set(responseId, sessionId);
  }

  /**
   * Where a response continues, when it is the newest of a session cached here and trusted
   * (no other process asked for it): its session is at the response's history hash. Undefined
   * otherwise: the caller reads the response's end from storage.
   */
  responseEnd(responseId: string): CachedResponseEnd | undefined {
    const sessionId = this.sessionOfResponse.get(responseId);
    const cached = sessionId === undefined ? undefined : this.cache.get(sessionId);
    if (!cached || cached.generation < 0 || cached.session.historyHash === null) return undefined;
    return { sessionId: cached.session.sessionId, userId: cached.session.userId, historyHash: cached.session.historyHash };
  }

  /** Forgets the last turns kept beside the actor: the next turn reads them from storage. */
  forgetRecent(sessionId: string): void {
    const cached = this.cache.get(sessionId);
    if (cached) cached.recent = undefined;
  }

  /** Stops a session's actor and forgets it (its stored snapshot stays); its lease, held while the actor was cached, goes back. */
  evict(sessionId: string): void {
    this.dropActor(sessionId);
    this.deps.leases?.giveBack(sessionId);
  }

  /**
   * Forgets what this process knows of a session another process took over (its lease
   * lapsed) or asked for: the actor is dropped now, or after the turn running on it.
   */
  distrust(sessionId: string): void {
    const cached = this.cache.get(sessionId);
    if (!cached) return;
    if (this.deps.isBusy(sessionId)) cached.generation = -1;
    else this.dropActor(sessionId);
  }

  /** Stops the idle sweeper and evicts every actor. */
  stop(): void {
    clearInterval(this.sweeper);
    for (const sessionId of [...this.cache.keys()]) this.evict(sessionId);
  }

  private dropActor(sessionId: string): void {
    const cached = this.cache.get(sessionId);
    if (!cached) return;
    cached.actor.stop();
    this.forgetResponse(cached);
    this.cache.delete(sessionId);
    this.deps.registry.trigger.remove({ sessionId });
  }

  private forgetResponse(cached: CachedActor): void {
    if (cached.newestResponseId === undefined) return;
    this.sessionOfResponse.delete(cached.newestResponseId);
    cached.newestResponseId = undefined;
  }

  /** Reports every transition of an actor on the event bus and in the registry. */
  private observe(actor: SessionActor, sessionId: string, userId: string): void {
    let previous: string | null = null;
    let counted: number | null = null;
    actor.subscribe((snapshot) => {
      const state = String(snapshot.value);
      const resting = isRestingState(this.deps.graph, state);
      // Counted transitions, a state's re-entry too (calls answered as unavailable where no tool state follows).
      if (previous !== null && (previous !== state || snapshot.context.transitions !== counted)) {
        const reason = snapshot.context.reason;
        this.deps.onTransition(sessionId, { at: new Date(), from: previous, to: state, reason: reason ?? null });
        this.deps.events.emit('session:state_changed', { sessionId, userId, from: previous, to: state, reason });
      }
      previous = state;
      counted = snapshot.context.transitions;
      this.deps.registry.trigger.upsert({
        session: {
          sessionId,
          userId,
          state,
          status: resting ? 'waiting_for_input' : 'processing',
          transitions: snapshot.context.transitions,
          lastActive: Date.now(),
        },
      });
    });
  }

  private evictOverflow(): void {
    for (const [sessionId] of this.cache) {
      if (this.cache.size <= this.deps.settings.cacheSize) return;
      if (!this.deps.isBusy(sessionId)) this.evict(sessionId);
    }
  }

  private evictIdle(): void {
    const cutoff = Date.now() - this.deps.settings.idleMs;
    for (const [sessionId, cached] of this.cache) {
      if (cached.lastUsed > cutoff) return;
      if (!this.deps.isBusy(sessionId)) this.evict(sessionId);
    }
  }
}

/** A stored snapshot with the configured limits in its context: they apply to a restored session as to a new one. */
function withLimits(snapshot: unknown, limits: SessionLimits): Snapshot<unknown> {
  const stored = snapshot as { context?: Record<string, unknown> };
  return { ...stored, context: { ...stored.context, ...limits } } as unknown as Snapshot<unknown>;
}
