/** A LIMIT from a caller's number: a non-negative whole number (PostgreSQL rejects negatives). */
export function rowLimit(limit: number): number {
  return Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
}
