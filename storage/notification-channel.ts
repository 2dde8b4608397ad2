import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { NotificationChannel } from '../runtime/ports.js';
import type { Database } from './create-database.js';

/**
 * The channel `name` of `database`: on a PostgreSQL server it reaches every worker and instance
 * that shares it; on the embedded database, which one process opens, it loops back to that process.
 */
export function createNotificationChannel(database: Database, name: string): NotificationChannel {
  return {
    async publish(payload) {
      await sql`select pg_notify(${name}, ${payload})`.execute(database.db);
    },
    subscribe: (onPayload) => database.listen(name, onPayload),
  };
}

/** What became of a notification sent to check the channels: `arrived`, `lost` (not there within the time), or `stopped` (asked to stop first). */
export type NotificationCheck = 'arrived' | 'lost' | 'stopped';

/**
 * Sends a notification through `database`'s pool and waits up to `timeoutMs` for it on a
 * connection listening as the channels do (`database.listen`). Behind a transaction pooler
 * such as PgBouncer the LISTEN ran on a server process that the pooler hands to other clients,
 * and the notification goes to whichever client holds it then, or to none: it is `lost`.
 */
export async function checkNotifications(database: Database, timeoutMs: number, signal: AbortSignal): Promise<NotificationCheck> {
  if (signal.aborted) return 'stopped';
  const channel = createNotificationChannel(database, `svc_notification_check_${randomBytes(8).toString('hex')}`);
  let settle!: (outcome: NotificationCheck) => void;
  const outcome = new Promise<NotificationCheck>((resolve) => (settle = resolve));
  const stop = () => settle('stopped');
  let timer: NodeJS.Timeout | undefined;
  const unsubscribe = await channel.subscribe(() => settle('arrived'));
  signal.addEventListener('abort', stop, { once: true });
  try {
    if (signal.aborted) return 'stopped';
    await channel.publish('check');
    timer = setTimeout(() => settle('lost'), timeoutMs);
    timer.unref();
    return await outcome;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', stop);
    await unsubscribe();
  }
}
