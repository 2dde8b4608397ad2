import pg from 'pg';

/** Stops listening. */
export type StopListening = () => Promise<void>;

/** How long a listener whose connection dropped waits before connecting again. */
const RECONNECT_MS = 1_000;

/**
 * Listens on a PostgreSQL channel (`LISTEN`) over a connection of its own, outside the pool,
 * and connects again after the server or the network dropped it. Resolves once listening;
 * rejects when the first connection fails. Notifications sent while it was disconnected are
 * lost: callers must have another way to learn what they said.
 */
export async function listenOnServer(
  url: string,
  channel: string,
  onPayload: (payload: string) => void,
  onError: (error: Error) => void,
): Promise<StopListening> {
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: url });
    next.on('notification', (message) => {
      if (message.channel === channel && message.payload !== undefined) onPayload(message.payload);
    });
    next.on('error', (error) => {
      onError(error);
      reconnectLater(next);
    });
    next.on('end', () => reconnectLater(next));
    client = next;
    await next.connect();
    await next.query(`listen ${pg.escapeIdentifier(channel)}`);
  };

  const reconnectLater = (dropped: pg.Client) => {
    if (stopped || client !== dropped || retry) return;
    client = undefined;
    void dropped.end().catch(() => undefined);
    retry = setTimeout(() => {
      retry = undefined;
      connect().catch((error: Error) => {
        onError(error);
        if (client) reconnectLater(client);
      });
    }, RECONNECT_MS);
    retry.unref();
  };

  await connect();
  return async () => {
    stopped = true;
    clearTimeout(retry);
    const last = client;
    client = undefined;
    await last?.end().catch(() => undefined);
  };
}
