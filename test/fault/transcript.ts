import type { Database } from '../../storage/index.js';

/** A session's stored messages in the order they were written, as `role: message` lines. */
export async function storedTranscript(database: Database, sessionId: string): Promise<string[]> {
  const rows = await database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
  return rows.map((row) => `${row.role}: ${row.message}`);
}
