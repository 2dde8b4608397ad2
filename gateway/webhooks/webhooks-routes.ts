import { randomBytes } from 'node:crypto';
import { Router, type RequestParamHandler, type Response } from 'express';
import { ServiceError } from '../../runtime/service-error.js';
import { WEBHOOK_EVENT_TYPES } from '../../runtime/webhooks/webhook-signature.js';
import { checkTargetUrl, resolveTarget, WebhookTargetError, type TargetPolicy } from '../../runtime/webhooks/webhook-targets.js';
import type { WebhookDelivery, WebhookStore, WebhookSubscription } from '../../runtime/ports.js';
import { callerOf } from '../http/api-keys.js';
import { listLimit, singleQuery } from '../http/list-query.js';
import { checkIdentifier, isValidIdentifier } from '../http/text-rules.js';

/** What the webhook routes are built from. */
export type WebhooksRouterDeps = {
  store: WebhookStore;
  policy: TargetPolicy;
  /** Told after every change so the dispatcher sees the new subscriptions at once. */
  onChange: () => Promise<void>;
};

/** Shortest accepted secret. */
const MIN_SECRET = 16;

/**
 * `/v1/webhooks`: subscriptions (create, list, read, activate/deactivate, delete), the delivery
 * log and redelivery. A subscription belongs to the user of the key that made it and hears
 * only that user's events; for another user's key it does not exist (404). A key bound to no
 * user is an admin key: its subscriptions hear every user's events, and it sees and manages
 * every subscription.
 */
export function createWebhooksRouter(deps: WebhooksRouterDeps): Router {
  const router = Router();
  router.param('id', checkPathId('id'));
  router.param('deliveryId', checkPathId('delivery_id'));

  router.post('/v1/webhooks', async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || Array.isArray(body)) throw invalid('The body must be a JSON object.', null);
    const url = await checkUrl(body.url, deps.policy);
    const events = checkEvents(body.events);
    if (typeof body.secret !== 'string' || body.secret.length < MIN_SECRET || body.secret.length > 512) {
      throw invalid(`secret must be a string of ${MIN_SECRET} to 512 characters.`, 'secret');
    }
    if (body.active !== undefined && typeof body.active !== 'boolean') throw invalid('active must be a boolean.', 'active');
    const subscription = await deps.store.createSubscription({
      id: `wh_${randomBytes(12).toString('hex')}`,
      url,
      events,
      secret: body.secret,
      active: body.active ?? true,
      ownerUserId: ownerOf(res) ?? null,
    });
    await deps.onChange();
    res.status(201).json(subscriptionObject(subscription));
  });

  router.get('/v1/webhooks', async (_req, res) => {
    const owner = ownerOf(res);
    const subscriptions = await deps.store.listSubscriptions(owner === undefined ? {} : { ownerUserId: owner });
    res.json({ object: 'list', data: subscriptions.map(subscriptionObject) });
  });

  router.get('/v1/webhooks/:id', async (req, res) => {
    res.json(subscriptionObject(await found(deps.store, req.params.id, res)));
  });

  router.patch('/v1/webhooks/:id', async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body.active !== 'boolean') throw invalid('active must be a boolean.', 'active');
    await found(deps.store, req.params.id, res);
    const subscription = await deps.store.setActive(req.params.id, body.active);
    if (!subscription) throw notFound(req.params.id);
    await deps.onChange();
    res.json(subscriptionObject(subscription));
  });

  router.delete('/v1/webhooks/:id', async (req, res) => {
    await found(deps.store, req.params.id, res);
    if (!(await deps.store.deleteSubscription(req.params.id))) throw notFound(req.params.id);
    await deps.onChange();
    res.json({ id: req.params.id, object: 'webhook.deleted', deleted: true });
  });

  router.get('/v1/webhooks/:id/deliveries', async (req, res) => {
    await found(deps.store, req.params.id, res);
    const limit = listLimit(req);
    const after = singleQuery(req, 'after');
    // The cursor is a delivery id this list gave: any other value would page from nowhere (an empty page).
    if (after !== undefined && !(isValidIdentifier(after) && (await deps.store.getDelivery(req.params.id, after)))) {
      throw invalid("after must be the id of one of this webhook's deliveries (the last_id of an earlier page).", 'after');
    }
    const rows = await deps.store.listDeliveries(req.params.id, { limit: limit + 1, ...(after !== undefined ? { after } : {}) });
    const page = rows.slice(0, limit).map(deliveryObject);
    res.json({ object: 'list', data: page, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: rows.length > limit });
  });

  router.post('/v1/webhooks/:id/deliveries/:deliveryId/redeliver', async (req, res) => {
    await found(deps.store, req.params.id, res);
    const delivery = await deps.store.requeue(req.params.id, req.params.deliveryId);
    if (!delivery) throw new ServiceError('NOT_FOUND', `No delivery found with id '${req.params.deliveryId}'.`, { param: 'delivery_id' });
    res.status(202).json(deliveryObject(delivery));
  });

  return router;
}

/** A subscription as the API shows it: never the secret. */
function subscriptionObject(subscription: WebhookSubscription) {
  return {
    id: subscription.id,
    object: 'webhook',
    url: subscription.url,
    events: subscription.events,
    active: subscription.active,
    // Whose events it hears; null: every user's (made with an admin key).
    user_id: subscription.ownerUserId,
    created_at: Math.floor(subscription.createdAt.getTime() / 1000),
  };
}

/** A delivery log entry (the payload is the exact body sent). */
function deliveryObject(delivery: WebhookDelivery) {
  return {
    id: delivery.deliveryId,
    object: 'webhook.delivery',
    webhook_id: delivery.subscriptionId,
    event: delivery.event,
    agent_id: delivery.agentId,
    status: delivery.status,
    attempts: delivery.attempts,
    last_status: delivery.lastStatus,
    last_error: delivery.lastError,
    next_attempt_at: delivery.status === 'pending' ? Math.floor(delivery.nextAttemptAt.getTime() / 1000) : null,
    created_at: Math.floor(delivery.createdAt.getTime() / 1000),
    delivered_at: delivery.deliveredAt ? Math.floor(delivery.deliveredAt.getTime() / 1000) : null,
    payload: delivery.payload,
  };
}

async function checkUrl(value: unknown, policy: TargetPolicy): Promise<string> {
  if (typeof value !== 'string' || value.length > 2048) throw invalid('url must be a string of at most 2048 characters.', 'url');
  try {
    const url = checkTargetUrl(value, policy);
    await resolveTarget(url, policy);
    return url.toString();
  } catch (error) {
    if (error instanceof WebhookTargetError) throw invalid(error.message, 'url');
    throw error;
  }
}

function checkEvents(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((entry) => typeof entry === 'string')) {
    throw invalid(`events must be a non-empty array of event types (${WEBHOOK_EVENT_TYPES.join(', ')}) or ["*"].`, 'events');
  }
  const known = new Set<string>([...WEBHOOK_EVENT_TYPES, '*']);
  const unknown = value.find((entry) => !known.has(entry));
  if (unknown !== undefined) throw invalid(`Unknown event type '${unknown}'; known: ${WEBHOOK_EVENT_TYPES.join(', ')}, or "*".`, 'events');
  return [...new Set(value as string[])];
}

/** The user a request's key is bound to; undefined for an admin key (bound to no user). */
function ownerOf(res: Response): string | undefined {
  return callerOf(res)?.userId;
}

/** The subscription, if the caller may see it: its owner's key or an admin key. */
async function found(store: WebhookStore, id: string, res: Response): Promise<WebhookSubscription> {
  const subscription = await store.getSubscription(id);
  const owner = ownerOf(res);
  if (!subscription || (owner !== undefined && subscription.ownerUserId !== owner)) throw notFound(id);
  return subscription;
}

/** Refuses a path id the database cannot hold (NUL, over 255 characters) before it reaches a query. */
function checkPathId(param: string): RequestParamHandler {
  return (_req, _res, next, value: string) => {
    checkIdentifier(value, param);
    next();
  };
}

function notFound(id: string): ServiceError {
  return new ServiceError('NOT_FOUND', `No webhook found with id '${id}'.`, { param: 'id' });
}

function invalid(message: string, param: string | null): ServiceError {
  return new ServiceError('INVALID_REQUEST', message, { param });
}
