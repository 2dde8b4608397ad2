import { createHmac, timingSafeEqual } from 'node:crypto';

/** The webhook event types a subscription may listen to. */
export const WEBHOOK_EVENT_TYPES = ['agent.created', 'agent.state_changed', 'tool.executed', 'memory.consolidated', 'error.occurred', 'budget.exceeded'] as const;

/** One webhook event type. */
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The signed part of a payload. */
export type UnsignedWebhookPayload = { event: string; timestamp: string; agent_id: string | null; data: Record<string, unknown> };

/**
 * The signed bytes of a payload: the UTF-8 JSON text (JSON.stringify, no spaces) of
 * `{event, timestamp, agent_id, data}` in that key order, without the signature field.
 */
export function canonicalPayload(payload: UnsignedWebhookPayload): string {
  return JSON.stringify({ event: payload.event, timestamp: payload.timestamp, agent_id: payload.agent_id, data: payload.data });
}

/** `sha256=` and the hex HMAC-SHA256 of `text` with `secret`. */
export function signWebhook(secret: string, text: string): string {
  return `sha256=${createHmac('sha256', secret).update(text, 'utf8').digest('hex')}`;
}

/** The request body sent: the canonical fields and `signature` (over canonicalPayload), as JSON text. */
export function signedPayloadText(secret: string, payload: UnsignedWebhookPayload): string {
  const signature = signWebhook(secret, canonicalPayload(payload));
  return JSON.stringify({ event: payload.event, timestamp: payload.timestamp, agent_id: payload.agent_id, data: payload.data, signature });
}

/** Constant-time check of a `sha256=` signature over `text` (what a receiver does). */
export function verifyWebhookSignature(secret: string, text: string, signature: string): boolean {
  const expected = Buffer.from(signWebhook(secret, text));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
