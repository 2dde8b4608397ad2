import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { resolveTarget, type TargetPolicy } from './webhook-targets.js';
import { signWebhook } from './webhook-signature.js';

/** What one delivery attempt sends. */
export type WebhookRequest = { url: string; secret: string; deliveryId: string; event: string; timestamp: string; body: string };

/** The outcome of one attempt: `status` when the receiver answered. */
export type WebhookAttempt = { ok: boolean; status: number | null; error?: string };

/**
 * POSTs one delivery: resolves and checks the host at send time, then connects to the
 * checked address (no second lookup, so DNS rebinding cannot redirect it), within `timeoutMs`.
 */
export async function sendWebhook(request: WebhookRequest, options: TargetPolicy & { timeoutMs: number; signal?: AbortSignal }): Promise<WebhookAttempt> {
  let url: URL;
  let pinned: { address: string; family: 4 | 6 };
  try {
    url = new URL(request.url);
    [pinned] = (await resolveTarget(url, options)) as [{ address: string; family: 4 | 6 }];
  } catch (error) {
    return { ok: false, status: null, error: (error as Error).message };
  }
  const lookup: LookupFunction = (_host, lookupOptions, callback) => {
    if ((lookupOptions as { all?: boolean }).all) (callback as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
  const body = Buffer.from(request.body, 'utf8');
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<WebhookAttempt>((resolve) => {
    const outgoing = transport.request(
      url,
      {
        method: 'POST',
        lookup,
        timeout: options.timeoutMs,
        signal: options.signal,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': String(body.length),
          'User-Agent': 'svc-agent-webhooks/1',
          'X-Webhook-Id': request.deliveryId,
          'X-Webhook-Event': request.event,
          'X-Webhook-Timestamp': request.timestamp,
          'X-Webhook-Signature-256': signWebhook(request.secret, request.body),
        },
      },
      (response) => {
        const status = response.statusCode ?? 0;
        response.resume();
        response.on('end', () => resolve(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `HTTP ${status}` }));
        response.on('error', (error) => resolve({ ok: false, status, error: error.message }));
      },
    );
    const deadline = setTimeout(() => outgoing.destroy(new Error(`timed out after ${options.timeoutMs} ms`)), options.timeoutMs);
    outgoing.on('timeout', () => outgoing.destroy(new Error(`timed out after ${options.timeoutMs} ms`)));
    outgoing.on('error', (error) => resolve({ ok: false, status: null, error: error.message }));
    outgoing.on('close', () => clearTimeout(deadline));
    outgoing.end(body);
  });
}
