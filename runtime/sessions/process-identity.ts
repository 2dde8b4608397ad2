import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * A name for one holder of claims in the database (session leases, webhook claims): the
 * host, the process id and a random part, so a restarted process never passes for its
 * predecessor.
 */
export function newHolderId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}
