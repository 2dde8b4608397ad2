/** A response's status: `queued` and `in_progress` while it runs (background responses are seen so), then one of the others. */
export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';

/** True for the statuses a response ends in. */
export function isFinalStatus(status: unknown): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled' || status === 'incomplete';
}
