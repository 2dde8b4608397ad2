import type { Logger } from 'winston';
import type { Database } from '../../storage/index.js';
import { checkNotifications } from '../../storage/notification-channel.js';

/** How long the notification sent at start may take to reach the listening connection before it counts as lost. */
export const NOTIFICATION_CHECK_MS = 5_000;

/**
 * Sends one notification at start and, when it does not reach the service's listening
 * connection, says in one line what to set: behind a transaction pooler (PgBouncer) LISTEN is
 * lost, and a session cached by one worker or instance then moves to another only once its lease
 * lapses. Resolves when the check ends (or `signal` stops it); never rejects.
 */
export async function warnWhenNotificationsAreLost(database: Database, options: { listenUrlSet: boolean; logger: Logger; signal: AbortSignal }): Promise<void> {
  const { listenUrlSet, logger, signal } = options;
  let outcome;
  try {
    outcome = await checkNotifications(database, NOTIFICATION_CHECK_MS, signal);
  } catch (error) {
    if (!signal.aborted) logger.warn(`database: the check that notifications arrive failed: ${(error as Error).message}`);
    return;
  }
  if (outcome !== 'lost') return;
  logger.warn(
    listenUrlSet
      ? `database.listen_url (DB_LISTEN_URL) did not receive a notification sent through database.url within ${NOTIFICATION_CHECK_MS} ms: it must name the same database, straight to the PostgreSQL server (not through a transaction pooler); until then a session held by one worker or instance moves to another only when its lease lapses (sessions.lease_ms)`
      : `database.url loses notifications (a transaction pooler such as PgBouncer?): one sent through it did not reach the listening connection within ${NOTIFICATION_CHECK_MS} ms, so a session held by one worker or instance moves to another only when its lease lapses (sessions.lease_ms); set database.listen_url (DB_LISTEN_URL) to the same database straight on the PostgreSQL server`,
  );
}
