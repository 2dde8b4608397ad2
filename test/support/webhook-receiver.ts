import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the receiver got. */
export type ReceivedWebhook = {
  id: string;
  event: string;
  timestamp: string;
  headers: IncomingHttpHeaders;
  raw: string;
  payload: Record<string, unknown>;
  /** The status it is (or will be, when held) answered with. */
  answered: number;
  /** Date.now() at arrival. */
  arrivedAt: number;
};

/** Independent verification (what a receiver does): HMAC-SHA256, hex, `sha256=`, constant time. */
function hmac(secret: string, text: string): string {
  return `sha256=${createHmac('sha256', secret).update(text, 'utf8').digest('hex')}`;
}
function sameSignature(expected: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A real HTTP webhook receiver on 127.0.0.1 that checks every signature, notes requests of one
 * agent that overlap, and can fail (`failNext`) or hold its answer (`holdWhen`) on purpose.
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  readonly badSignatures: string[] = [];
  /** Ids of requests that arrived while an earlier request of the same agent was unanswered. */
  readonly overlaps: string[] = [];
  failNext = 0;
  /** Requests for which this returns true are answered only by `releaseHeld()` (or never). */
  holdWhen: ((request: ReceivedWebhook) => boolean) | undefined;
  port = 0;
  private readonly held: Array<() => void> = [];
  private readonly unanswered = new Map<string, number>();
  private server: Server | undefined;

  constructor(private readonly secret: string) {}

  /** Requests waiting for `releaseHeld()`. */
  get heldCount(): number {
    return this.held.length;
  }

  /** The deliveries acknowledged with a 2xx, in arrival order. */
  get acknowledged(): ReceivedWebhook[] {
    return this.received.filter((entry) => entry.answered < 300);
  }

  async start(port = 0): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const payload = JSON.parse(raw) as Record<string, unknown>;
        this.check(raw, payload, req.headers);
        const answered = this.failNext > 0 ? 500 : 204;
        if (this.failNext > 0) this.failNext -= 1;
        const entry: ReceivedWebhook = {
          id: String(req.headers['x-webhook-id']),
          event: String(payload.event),
          timestamp: String(payload.timestamp),
          headers: req.headers,
          raw,
          payload,
          answered,
          arrivedAt: Date.now(),
        };
        this.received.push(entry);
        this.track(entry, res);
        const answer = () => {
          res.statusCode = answered;
          res.end();
        };
        if (this.holdWhen?.(entry)) this.held.push(answer);
        else answer();
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Answers every held request. */
  releaseHeld(): void {
    for (const answer of this.held.splice(0)) answer();
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The documented canonical bytes: {event, timestamp, agent_id, data} as JSON, no signature. */
  private check(raw: string, payload: Record<string, unknown>, headers: IncomingHttpHeaders): void {
    const canonical = JSON.stringify({ event: payload.event, timestamp: payload.timestamp, agent_id: payload.agent_id, data: payload.data });
    if (!sameSignature(hmac(this.secret, canonical), payload.signature)) this.badSignatures.push(`payload ${raw}`);
    if (!sameSignature(hmac(this.secret, raw), headers['x-webhook-signature-256'])) this.badSignatures.push(`header ${raw}`);
    if (headers['x-webhook-timestamp'] !== payload.timestamp) this.badSignatures.push(`timestamp ${raw}`);
    if (headers['x-webhook-event'] !== payload.event) this.badSignatures.push(`event ${raw}`);
  }

  /** Counts the agent's unanswered requests until this one is answered or its sender hangs up. */
  private track(entry: ReceivedWebhook, res: ServerResponse): void {
    const agent = String(entry.payload.agent_id);
    const open = this.unanswered.get(agent) ?? 0;
    if (open > 0) this.overlaps.push(entry.id);
    this.unanswered.set(agent, open + 1);
    res.once('close', () => this.unanswered.set(agent, (this.unanswered.get(agent) ?? 1) - 1));
  }
}
