import { randomUUID } from 'node:crypto';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, JSONRPCResponse, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { NotificationChannel } from '../../runtime/ports.js';
import type { McpServerSdk } from './mcp-server-sdk.js';

/** A message of the client that concerns a request in flight: its answer to a request of the service, or its cancellation of one of its own. */
export type ClientFollowUp = JSONRPCResponse | (JSONRPCMessage & { method: 'notifications/cancelled' });

/**
 * A follow-up as it travels between processes. `session` names the conversation it belongs to:
 * the route gives the agent session, derived from the MCP session and the user, so that a
 * follow-up reaches only requests of the same MCP session and the same user.
 */
type Relayed = { session: string; message: ClientFollowUp };

/** Where a follow-up goes: the transport of the request it concerns, in the session `session`. */
type Waiting = { session: string; deliver: (message: ClientFollowUp) => void };

/**
 * Carries the client's follow-ups of a request in flight (its answer to an elicitation the
 * service sent on a `tools/call`'s SSE stream, or its cancellation of the call) to that request,
 * in whichever process it runs. The client sends them in POSTs of their own, which the cluster
 * may hand to another worker, or a load balancer to another instance. So each request the
 * service sends gets an id unique to the whole service (the SDK numbers a server's requests
 * from 0, and each POST here has a server of its own), and a follow-up nothing here waits for
 * goes out on the database's notification channel, to the process where its request runs.
 */
export class ClientAnswerRelay {
  private readonly waiting = new Map<string, Waiting>();
  private stopListening?: () => Promise<void>;

  constructor(
    /** The protocol's message guards and schemas. */
    private readonly sdk: McpServerSdk,
    private readonly channel?: NotificationChannel,
  ) {}

  /** Listens for follow-ups that other processes received. */
  async start(): Promise<void> {
    this.stopListening = await this.channel?.subscribe((payload) => {
      try {
        const relayed = JSON.parse(payload) as Relayed;
        this.deliverHere(relayed.session, relayed.message);
      } catch {
        // Not a follow-up of this service's: nothing waits for it.
      }
    });
  }

  /**
   * Makes the follow-ups of the requests a POST brought (`requestIds`) and of the requests the
   * server sends back over `transport` reach it, in the session `session`: the server's
   * requests go out under service-wide ids, and their answers come back under their own.
   * Returns the way to forget them all, once the POST is over.
   */
  attach(transport: Transport, session: string, requestIds: readonly RequestId[]): () => void {
    const keys = requestIds.map((id) => cancelKey(session, id));
    for (const key of keys) this.waiting.set(key, { session, deliver: (message) => transport.onmessage?.(message) });
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      if (!this.sdk.isJSONRPCRequest(message)) return send(message, options);
      const id = `svc-${randomUUID()}`;
      keys.push(id);
      this.waiting.set(id, {
        session,
        deliver: (answer) => {
          this.waiting.delete(id);
          transport.onmessage?.({ ...answer, id: message.id } as JSONRPCMessage);
        },
      });
      return send({ ...message, id }, options);
    };
    return () => {
      for (const key of keys) this.waiting.delete(key);
    };
  }

  /** Routes a follow-up in the session `session`: to its request here, else to the other processes. */
  async route(session: string, message: ClientFollowUp): Promise<void> {
    if (this.deliverHere(session, message)) return;
    await this.channel?.publish(JSON.stringify({ session, message } satisfies Relayed));
  }

  /** Stops listening. */
  async close(): Promise<void> {
    await this.stopListening?.();
    this.stopListening = undefined;
  }

  /** True when a client's message concerns a request in flight (see ClientFollowUp). */
  isFollowUp(message: JSONRPCMessage): message is ClientFollowUp {
    const { isJSONRPCResultResponse, isJSONRPCErrorResponse, isJSONRPCNotification } = this.sdk;
    if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) return true;
    return isJSONRPCNotification(message) && message.method === 'notifications/cancelled';
  }

  private deliverHere(session: string, message: ClientFollowUp): boolean {
    const key = this.keyOf(session, message);
    const waiting = key === undefined ? undefined : this.waiting.get(key);
    // A follow-up from another session (or user) is not this request's, whatever id it names.
    if (!waiting || waiting.session !== session) return false;
    waiting.deliver(message);
    return true;
  }

  private keyOf(session: string, message: ClientFollowUp): string | undefined {
    if ('method' in message) {
      const parsed = this.sdk.CancelledNotificationSchema.safeParse(message);
      const requestId = parsed.success ? parsed.data.params.requestId : undefined;
      return requestId === undefined ? undefined : cancelKey(session, requestId);
    }
    return typeof message.id === 'string' ? message.id : undefined;
  }
}


function cancelKey(session: string, requestId: RequestId): string {
  return `cancel ${session} ${JSON.stringify(requestId)}`;
}
