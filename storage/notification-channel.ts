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
