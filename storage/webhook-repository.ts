import { sql, type Kysely, type Selectable } from 'kysely';
import type { DatabaseSchema, WebhookDeliveriesTable, WebhookSubscriptionsTable } from './database-schema.js';

/** A webhook subscription as stored (the secret included: the HMAC needs it). */
export type WebhookSubscription = {
  id: string;
  url: string;
  events: string[];
  secret: string;
  active: boolean;
  createdAt: Date;
  updatedAt: Date;
};

/** Where a delivery stands: waiting for its (next) attempt, acknowledged with a 2xx, or given up. */
export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One row of the outbox. */
export type WebhookDelivery = {
  /** Outbox order (identity). */
  seq: number;
  deliveryId: string;
  subscriptionId: string;
  agentId: string | null;
  event: string;
  /** The exact request body sent, signature included. */
  payload: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  nextAttemptAt: Date;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: Date;
  deliveredAt: Date | null;
};

/** A delivery to add to the outbox. */
export type NewWebhookDelivery = Pick<WebhookDelivery, 'deliveryId' | 'subscriptionId' | 'agentId' | 'event' | 'payload'>;

/** The outcome of one failed attempt. */
export type WebhookAttemptFailure = { attempts: number; failed: boolean; nextAttemptAt: Date; lastStatus: number | null; lastError: string };

/** Subscriptions and the delivery outbox. */
export type WebhookStore = {
  createSubscription(input: { id: string; url: string; events: string[]; secret: string; active: boolean }): Promise<WebhookSubscription>;
  listSubscriptions(): Promise<WebhookSubscription[]>;
  getSubscription(id: string): Promise<WebhookSubscription | undefined>;
  setActive(id: string, active: boolean): Promise<WebhookSubscription | undefined>;
  deleteSubscription(id: string): Promise<boolean>;
  activeSubscriptions(): Promise<WebhookSubscription[]>;
  enqueue(deliveries: NewWebhookDelivery[]): Promise<void>;
  /** One subscription's deliveries, newest first, older than the cursor `after` (a delivery id). */
  listDeliveries(subscriptionId: string, options: { limit: number; after?: string }): Promise<WebhookDelivery[]>;
  getDelivery(subscriptionId: string, deliveryId: string): Promise<WebhookDelivery | undefined>;
  /** Puts a delivery back to pending with fresh attempts. */
  requeue(subscriptionId: string, deliveryId: string): Promise<WebhookDelivery | undefined>;
  /**
   * The oldest pending delivery of every (subscription, agent) whose attempt is due: a later
   * delivery of the same agent is never returned while an earlier one is pending.
   */
  dueHeads(now: Date, limit: number): Promise<WebhookDelivery[]>;
  markDelivered(seq: number, status: number, at: Date): Promise<void>;
  markFailedAttempt(seq: number, failure: WebhookAttemptFailure): Promise<void>;
};

/** The webhook tables behind the WebhookStore. */
export function createWebhookRepository(db: Kysely<DatabaseSchema>): WebhookStore {
  return {
    async createSubscription(input) {
      const row = await db
        .insertInto('webhook_subscriptions')
        .values({ id: input.id, url: input.url, events: JSON.stringify(input.events), secret: input.secret, active: input.active })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toSubscription(row);
    },

    async listSubscriptions() {
      const rows = await db.selectFrom('webhook_subscriptions').selectAll().orderBy('created_at', 'desc').orderBy('id').execute();
      return rows.map(toSubscription);
    },

    async getSubscription(id) {
      const row = await db.selectFrom('webhook_subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
      return row && toSubscription(row);
    },

    async setActive(id, active) {
      const row = await db
        .updateTable('webhook_subscriptions')
        .set({ active, updated_at: new Date() })
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirst();
      return row && toSubscription(row);
    },

    async deleteSubscription(id) {
      const result = await db.deleteFrom('webhook_subscriptions').where('id', '=', id).executeTakeFirst();
      return Number(result.numDeletedRows) > 0;
    },

    async activeSubscriptions() {
      const rows = await db.selectFrom('webhook_subscriptions').selectAll().where('active', '=', true).execute();
      return rows.map(toSubscription);
    },

    async enqueue(deliveries) {
      if (deliveries.length === 0) return;
      await db
        .insertInto('webhook_deliveries')
        .values(
          deliveries.map((delivery) => ({
            delivery_id: delivery.deliveryId,
            subscription_id: delivery.subscriptionId,
            agent_id: delivery.agentId,
            event: delivery.event,
            payload: delivery.payload,
          })),
        )
        .execute();
    },

    async listDeliveries(subscriptionId, options) {
      let query = db.selectFrom('webhook_deliveries').selectAll().where('subscription_id', '=', subscriptionId);
      if (options.after) {
        const cursor = db.selectFrom('webhook_deliveries').select('id').where('delivery_id', '=', options.after);
        query = query.where('id', '<', cursor);
      }
      const rows = await query.orderBy('id', 'desc').limit(options.limit).execute();
      return rows.map(toDelivery);
    },

    async getDelivery(subscriptionId, deliveryId) {
      const row = await db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('subscription_id', '=', subscriptionId)
        .where('delivery_id', '=', deliveryId)
        .executeTakeFirst();
      return row && toDelivery(row);
    },

    async requeue(subscriptionId, deliveryId) {
      const row = await db
        .updateTable('webhook_deliveries')
        .set({ status: 'pending', attempts: 0, next_attempt_at: new Date(), delivered_at: null })
        .where('subscription_id', '=', subscriptionId)
        .where('delivery_id', '=', deliveryId)
        .returningAll()
        .executeTakeFirst();
      return row && toDelivery(row);
    },

    async dueHeads(now, limit) {
      const { rows } = await sql<Selectable<WebhookDeliveriesTable>>`
        select * from (
          select distinct on (d.subscription_id, coalesce(d.agent_id, '')) d.*
          from webhook_deliveries d
          join webhook_subscriptions s on s.id = d.subscription_id and s.active
          where d.status = 'pending'
          order by d.subscription_id, coalesce(d.agent_id, ''), d.id
        ) heads
        where heads.next_attempt_at <= ${now}
        order by heads.id
        limit ${limit}`.execute(db);
      return rows.map(toDelivery);
    },

    async markDelivered(seq, status, at) {
      await db
        .updateTable('webhook_deliveries')
        .set((eb) => ({ status: 'delivered', attempts: eb('attempts', '+', 1), last_status: status, last_error: null, delivered_at: at }))
        .where('id', '=', seq as never)
        .execute();
    },

    async markFailedAttempt(seq, failure) {
      await db
        .updateTable('webhook_deliveries')
        .set({
          status: failure.failed ? 'failed' : 'pending',
          attempts: failure.attempts,
          next_attempt_at: failure.nextAttemptAt,
          last_status: failure.lastStatus,
          last_error: failure.lastError.slice(0, 1000),
        })
        .where('id', '=', seq as never)
        .execute();
    },
  };
}

function toSubscription(row: Selectable<WebhookSubscriptionsTable>): WebhookSubscription {
  return {
    id: row.id,
    url: row.url,
    events: typeof row.events === 'string' ? (JSON.parse(row.events) as string[]) : row.events,
    secret: row.secret,
    active: row.active,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toDelivery(row: Selectable<WebhookDeliveriesTable>): WebhookDelivery {
  return {
    seq: Number(row.id),
    deliveryId: row.delivery_id,
    subscriptionId: row.subscription_id,
    agentId: row.agent_id,
    event: row.event,
    payload: row.payload,
    status: row.status as WebhookDeliveryStatus,
    attempts: row.attempts,
    nextAttemptAt: new Date(row.next_attempt_at),
    lastStatus: row.last_status,
    lastError: row.last_error,
    createdAt: new Date(row.created_at),
    deliveredAt: row.delivered_at ? new Date(row.delivered_at) : null,
  };
}
