import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { Logger } from 'winston';
import type { NewWebhookDelivery, WebhookDelivery, WebhookStore, WebhookSubscription } from '../ports.js';
import type { DurableWriter } from '../sessions/durable-writer.js';
import type { EventBus } from '../observability/event-bus.js';
import { sendWebhook } from './webhook-sender.js';
import { signedPayloadText, type UnsignedWebhookPayload, type WebhookEventType } from './webhook-signature.js';
import { newHolderId } from '../sessions/process-identity.js';

/** Retry, time-out and target settings of the dispatcher (config `webhooks.*`). */
export type WebhookSettings = {
  allowHttp: boolean;
  allowPrivateTargets: boolean;
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  timeoutMs: number;
  pollMs: number;
  /**
   * How long a claim on a delivery holds; another process takes the delivery over after it
   * (its claimant died). Must exceed `timeoutMs`; by default `timeoutMs` + 30 s.
   */
  claimLeaseMs?: number;
};

/** What the dispatcher is built from. */
export type WebhookDispatcherDeps = { events: EventBus; store: WebhookStore; writer: DurableWriter; logger: Logger; settings: WebhookSettings };

/** The runtime event turned into a webhook event (before it is signed per subscription). */
/** An event as webhooks send it, and the user it is about (null: no user's, e.g. a database error). */
type MappedEvent = { event: WebhookEventType; agentId: string | null; userId: string | null; data: Record<string, unknown> };

/** The DurableWriter key of outbox writes (one key: enqueue order is event order). */
const WRITER_KEY = 'webhooks';
/** Operations whose failures are not themselves reported (a database outage would feed itself). */
const OPERATION_PREFIX = 'webhooks:';
/** Active subscriptions are re-read this often even without changes through this service. */
const REFRESH_MS = 5000;
/** Deliveries attempted per round of the delivery loop. */
const BATCH = 50;
/** What the default claim lease adds to the delivery time-out (name resolution, recording the outcome). */
const CLAIM_MARGIN_MS = 30_000;

/** A new delivery id: `dlv_` and 24 hex digits. */
export function newDeliveryId(): string {
  return `dlv_${randomBytes(12).toString('hex')}`;
}

/** The wait before attempt `attempts + 1`: initial × 2^(attempts − 1), at most the maximum. */
export function backoffMs(attempts: number, settings: Pick<WebhookSettings, 'initialBackoffMs' | 'maxBackoffMs'>): number {
  return Math.min(settings.initialBackoffMs * 2 ** Math.max(0, attempts - 1), settings.maxBackoffMs);
}

/**
 * Turns runtime events into signed deliveries in the durable outbox (without waiting on the
 * database in the event path) and runs the delivery loop: in order per subscription and
 * agent, with exponential back-off, then `failed` after max attempts.
 *
 * Several processes (workers, instances) may each run one on the same database. Each enqueues
 * the events of its own turns; each delivery is attempted only by the process that claimed it
 * in the database, and per (subscription, agent) only the oldest pending one can be claimed,
 * so order holds across processes. A claim lapses after `claimLeaseMs` (its process died) and
 * another process sends the delivery again: the one case, besides a receiver answering after
 * the time-out, where a receiver sees an `X-Webhook-Id` twice. Subscriptions are cached per
 * process: one created, changed or deleted through another process is seen here within
 * REFRESH_MS (the outbox only takes rows of subscriptions that exist and are active).
 */
export class WebhookDispatcher {
  /** This dispatcher, as the claims in the outbox name it. */
  private readonly holder = newHolderId();
  private readonly claimLeaseMs: number;
  private subscriptions: WebhookSubscription[] = [];
  private readonly unsubscribe: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private lastRefresh = 0;
  private stopped = true;
  private readonly aborter = new AbortController();

  constructor(private readonly deps: WebhookDispatcherDeps) {
    // Every send of a round listens on the one shutdown signal.
    setMaxListeners(BATCH + 10, this.aborter.signal);
    const { timeoutMs, claimLeaseMs = timeoutMs + CLAIM_MARGIN_MS } = deps.settings;
    if (claimLeaseMs <= timeoutMs) throw new RangeError(`the webhook claim lease (${claimLeaseMs} ms) must exceed the delivery time-out (${timeoutMs} ms)`);
    this.claimLeaseMs = claimLeaseMs;
  }

  /** Loads the active subscriptions, listens to the event bus, and starts the delivery loop. */
  async start(): Promise<void> {
    // A database hiccup here only delays the subscriptions: the loop re-reads them.
    await this.refresh().catch((error: unknown) => this.deps.logger.warn(`webhook subscriptions not loaded: ${(error as Error).message}`));
    this.stopped = false;
    const { events } = this.deps;
    this.unsubscribe.push(
      events.on('session:created', (e) => this.publish({ event: 'agent.created', agentId: e.sessionId, userId: e.userId, data: { user_id: e.userId } })),
      events.on('session:state_changed', (e) =>
        this.publish({
          event: 'agent.state_changed',
          agentId: e.sessionId,
          userId: e.userId,
          data: { previous_state: e.from, current_state: e.to, transition_reason: e.reason },
        }),
      ),
      events.on('tool:call', (e) => {
        this.publish({
          event: 'tool.executed',
          agentId: e.sessionId,
          userId: e.userId,
          data: { tool: e.tool, server: e.server, duration_ms: Math.round(e.durationMs), outcome: e.outcome },
        });
        if (e.outcome === 'error') {
          this.publish({ event: 'error.occurred', agentId: e.sessionId, userId: e.userId, data: { source: 'tool', message: `The tool ${e.tool} failed.`, tool: e.tool } });
        }
      }),
      events.on('memory:written', (e) => {
        if (e.kind === 'long_term') this.publish({ event: 'memory.consolidated', agentId: e.sessionId, userId: e.userId, data: { entries: e.entries } });
      }),
      // The first refusal of a user's day or month budget in this process (each process tells its own), and every turn stopped by its budget.
      events.on('budget:exceeded', (e) => {
        if (!e.first) return;
        this.publish({
          event: 'budget.exceeded',
          agentId: e.sessionId,
          userId: e.userId,
          data: {
            user_id: e.userId,
            budget: e.budget,
            limit: e.limit,
            used: e.used,
            resets_at: e.resetsAt === null ? null : Math.floor(e.resetsAt / 1000),
            refused: e.refused,
          },
        });
      }),
      events.on('llm:error', (e) => this.publish({ event: 'error.occurred', agentId: e.sessionId, userId: e.userId, data: { source: 'llm', message: e.message } })),
      events.on('storage:error', (e) => {
        // The first failure and the final one of an operation; never our own writes.
        if (e.operation.startsWith(OPERATION_PREFIX) || (e.attempt > 1 && e.willRetry)) return;
        this.publish({ event: 'error.occurred', agentId: null, userId: null, data: { source: 'storage', message: e.error.message, operation: e.operation } });
      }),
    );
    this.schedule(0);
  }

  /** Re-reads the active subscriptions (after a change through the API). */
  async refresh(): Promise<void> {
    this.subscriptions = await this.deps.store.activeSubscriptions();
    this.lastRefresh = Date.now();
  }

  /**
   * Stops listening and the loop. The attempts in flight may finish for one delivery time-out
   * (their outcome is recorded), then are cut off; an attempt cut off, and every delivery not
   * attempted, stays pending with its claim given back, for the next run or another process.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const off of this.unsubscribe.splice(0)) off();
    clearTimeout(this.timer);
    // Name resolution is not bounded by the request's own time-out.
    const cutOff = setTimeout(() => this.aborter.abort(), this.deps.settings.timeoutMs);
    await this.round;
    clearTimeout(cutOff);
  }

  /**
   * Signs the event for each listening subscription and queues the outbox insert; never awaits.
   * A subscription hears the events of its owner only; an admin one (no owner) hears all.
   */
  private publish(mapped: MappedEvent): void {
    const listening = this.subscriptions.filter(
      (subscription) =>
        (subscription.events.includes(mapped.event) || subscription.events.includes('*')) &&
        (subscription.ownerUserId === null || subscription.ownerUserId === mapped.userId),
    );
    if (listening.length === 0) return;
    const payload: UnsignedWebhookPayload = { event: mapped.event, timestamp: new Date().toISOString(), agent_id: mapped.agentId, data: mapped.data };
    const rows: NewWebhookDelivery[] = listening.map((subscription) => ({
      deliveryId: newDeliveryId(),
      subscriptionId: subscription.id,
      agentId: mapped.agentId,
      event: mapped.event,
      payload: signedPayloadText(subscription.secret, payload),
    }));
    this.deps.writer.write(WRITER_KEY, `${OPERATION_PREFIX} enqueue ${mapped.event}`, () => this.deps.store.enqueue(rows)).catch((error: unknown) => {
      // The writer closed, or a subscription was deleted in that very instant: the event is dropped.
      this.deps.logger.warn(`webhook event ${mapped.event} not queued: ${(error as Error).message}`);
    });
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.round = this.runRound().then((busy) => this.schedule(busy ? 0 : this.deps.settings.pollMs));
    }, delayMs);
  }

  /** One round: the due heads this process could claim, sent in parallel. True when something was claimed. */
  private async runRound(): Promise<boolean> {
    try {
      if (Date.now() - this.lastRefresh > REFRESH_MS) await this.refresh();
      const due = await this.deps.store.claimDueHeads(this.holder, this.claimLeaseMs, BATCH);
      if (due.length === 0) return false;
      if (this.stopped) {
        await this.release(due);
        return false;
      }
      const secrets = new Map(this.subscriptions.map((subscription) => [subscription.id, subscription]));
      // Every attempt settles before the round ends, so stop() never returns with one in flight.
      await Promise.all(
        due.map((delivery) =>
          this.attempt(delivery, secrets.get(delivery.subscriptionId)).catch((error: unknown) => {
            // The outcome was not recorded: the claim lapses and the delivery is attempted again.
            this.deps.logger.warn(`webhook delivery ${delivery.deliveryId} not recorded: ${(error as Error).message}`);
          }),
        ),
      );
      return true;
    } catch (error) {
      this.deps.logger.warn(`webhook delivery round failed: ${(error as Error).message}`);
      return false;
    }
  }

  private async attempt(delivery: WebhookDelivery, cached: WebhookSubscription | undefined): Promise<void> {
    const subscription = cached ?? (await this.deps.store.getSubscription(delivery.subscriptionId));
    if (!subscription) return this.release([delivery]); // deleted meanwhile: its deliveries go with it
    const { settings } = this.deps;
    const body = JSON.parse(delivery.payload) as { timestamp: string };
    const result = await sendWebhook(
      { url: subscription.url, secret: subscription.secret, deliveryId: delivery.deliveryId, event: delivery.event, timestamp: body.timestamp, body: delivery.payload },
      { allowHttp: settings.allowHttp, allowPrivateTargets: settings.allowPrivateTargets, timeoutMs: settings.timeoutMs, signal: this.aborter.signal },
    );
    if (this.aborter.signal.aborted && !result.ok) return this.release([delivery]); // cut off at shutdown: sent again later
    if (result.ok) {
      const recorded = await this.deps.store.markDelivered(delivery.seq, this.holder, result.status!);
      if (!recorded) this.warnTakenOver(delivery);
      return;
    }
    const attempts = delivery.attempts + 1;
    const failed = attempts >= settings.maxAttempts;
    const recorded = await this.deps.store.markFailedAttempt(delivery.seq, this.holder, {
      attempts,
      failed,
      retryAfterMs: backoffMs(attempts, settings),
      lastStatus: result.status,
      lastError: result.error ?? 'failed',
    });
    if (!recorded) this.warnTakenOver(delivery);
    else if (failed) this.deps.logger.warn(`webhook delivery ${delivery.deliveryId} failed after ${attempts} attempts: ${result.error}`);
  }

  /** Gives back claims, the deliveries left pending as they were; should that fail, the claims lapse. */
  private async release(deliveries: WebhookDelivery[]): Promise<void> {
    await this.deps.store.releaseClaims(deliveries.map((delivery) => delivery.seq), this.holder);
  }

  private warnTakenOver(delivery: WebhookDelivery): void {
    this.deps.logger.warn(`webhook delivery ${delivery.deliveryId}: its claim lapsed and another process took it over; this attempt's outcome is not recorded`);
  }
}
