import { sql, type Kysely, type Selectable } from 'kysely';
import type { DatabaseSchema, WebhookDeliveriesTable, WebhookSubscriptionsTable } from './database-schema.js';
import { databaseCalls } from './database-calls.js';
import type { WebhookDelivery, WebhookDeliveryStatus, WebhookStore, WebhookSubscription } from '../runtime/ports.js';

/** The webhook tables behind the WebhookStore. */
export function createWebhookRepository(db: Kysely<DatabaseSchema>): WebhookStore {
  return databaseCalls<WebhookStore>({
    async createSubscription(input) {
      const row = await db
        .insertInto('webhook_subscriptions')
        .values({ id: input.id, url: input.url, events: JSON.stringify(input.events), secret: input.secret, active: input.active, owner_user_id: input.ownerUserId ?? null })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toSubscription(row);
    },

    async listSubscriptions(options = {}) {
      let query = db.selectFrom('webhook_subscriptions').selectAll();
      if (options.ownerUserId !== undefined) query = query.where('owner_user_id', '=', options.ownerUserId);
      const rows = await query.orderBy('created_at', 'desc').orderBy('id').execute();
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
      const rows = deliveries.map(
        (delivery) => sql`(${delivery.deliveryId}, ${delivery.subscriptionId}, ${delivery.agentId}, ${delivery.event}, ${delivery.payload})`,
      );
      // The subscriptions the caller knows may be a few seconds old (another process changed them).
      await sql`
        insert into webhook_deliveries (delivery_id, subscription_id, agent_id, event, payload)
        select v.delivery_id, v.subscription_id, v.agent_id, v.event, v.payload
        from (values ${sql.join(rows)}) as v (delivery_id, subscription_id, agent_id, event, payload)
        join webhook_subscriptions s on s.id = v.subscription_id and s.active`.execute(db);
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

    async claimDueHeads(holder, leaseMs, limit) {
      // The outer conditions are checked again on the newest row version when another process
      // claimed or finished the row meanwhile, so of racing claims exactly one gets the row.
      const { rows } = await sql<Selectable<WebhookDeliveriesTable>>`
        update webhook_deliveries d
        set claimed_by = ${holder}, claimed_until = now() + ${leaseMs} * interval '1 millisecond'
        where d.id in (
          select heads.id from (
            select distinct on (p.subscription_id, coalesce(p.agent_id, '')) p.id, p.next_attempt_at, p.claimed_until
            from webhook_deliveries p
            join webhook_subscriptions s on s.id = p.subscription_id and s.active
            where p.status = 'pending'
            order by p.subscription_id, coalesce(p.agent_id, ''), p.id
          ) heads
          where heads.next_attempt_at <= now() and (heads.claimed_until is null or heads.claimed_until < now())
          order by heads.id
          limit ${limit}
        )
          and d.status = 'pending'
          and d.next_attempt_at <= now()
          and (d.claimed_until is null or d.claimed_until < now())
        returning d.*`.execute(db);
      return rows.map(toDelivery).sort((a, b) => a.seq - b.seq);
    },

    async markDelivered(seq, holder, status) {
      const result = await db
        .updateTable('webhook_deliveries')
        .set((eb) => ({
          status: 'delivered',
          attempts: eb('attempts', '+', 1),
          last_status: status,
          last_error: null,
          delivered_at: sql<Date>`now()`,
          claimed_by: null,
          claimed_until: null,
        }))
        .where('id', '=', seq as never)
        .where('claimed_by', '=', holder)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },

    async markFailedAttempt(seq, holder, failure) {
      const result = await db
        .updateTable('webhook_deliveries')
        .set({
          status: failure.failed ? 'failed' : 'pending',
          attempts: failure.attempts,
          next_attempt_at: sql<Date>`now() + ${failure.retryAfterMs} * interval '1 millisecond'`,
          last_status: failure.lastStatus,
          last_error: failure.lastError.slice(0, 1000),
          claimed_by: null,
          claimed_until: null,
        })
        .where('id', '=', seq as never)
        .where('claimed_by', '=', holder)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },

    async releaseClaims(seqs, holder) {
      if (seqs.length === 0) return;
      await db
        .updateTable('webhook_deliveries')
        .set({ claimed_by: null, claimed_until: null })
        .where('id', 'in', seqs as never[])
        .where('claimed_by', '=', holder)
        .execute();
    },

    async countPending() {
      const row = await db
        .selectFrom('webhook_deliveries')
        .select(sql<number>`count(*)::int`.as('pending'))
        .where('status', '=', 'pending')
        .executeTakeFirstOrThrow();
      return row.pending;
    },
  });
}

function toSubscription(row: Selectable<WebhookSubscriptionsTable>): WebhookSubscription {
  return {
    id: row.id,
    url: row.url,
    events: typeof row.events === 'string' ? (JSON.parse(row.events) as string[]) : row.events,
    secret: row.secret,
    active: row.active,
    ownerUserId: row.owner_user_id,
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
