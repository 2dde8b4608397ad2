import type { Kysely, Selectable } from 'kysely';
import type { OAuthStateRecord, OAuthStateStore } from '../runtime/ports.js';
import type { DatabaseSchema, OAuthStatesTable } from './database-schema.js';
import { databaseCalls } from './database-calls.js';

/** The oauth_states table behind the OAuthStateStore port: each state is taken once. */
export function createOAuthStateRepository(db: Kysely<DatabaseSchema>): OAuthStateStore {
  return databaseCalls<OAuthStateStore>({
    async create(record: Omit<OAuthStateRecord, 'createdAt'>): Promise<void> {
      await db
        .insertInto('oauth_states')
        .values({
          state: record.state,
          user_id: record.userId,
          provider: record.provider,
          code_verifier: record.codeVerifier,
          nonce: record.nonce,
          browser_binding: record.browserBinding,
          expires_at: record.expiresAt,
        })
        .execute();
    },

    async consume(state: string, now: Date = new Date()): Promise<OAuthStateRecord | undefined> {
      // DELETE … RETURNING takes the row in one statement: a concurrent or replayed call finds nothing.
      const row = await db.deleteFrom('oauth_states').where('state', '=', state).returningAll().executeTakeFirst();
      if (!row || row.expires_at.getTime() <= now.getTime()) return undefined;
      return toRecord(row);
    },

    async purgeExpired(now: Date = new Date()): Promise<number> {
      const result = await db.deleteFrom('oauth_states').where('expires_at', '<=', now).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  });
}

function toRecord(row: Selectable<OAuthStatesTable>): OAuthStateRecord {
  return {
    state: row.state,
    userId: row.user_id,
    provider: row.provider,
    codeVerifier: row.code_verifier,
    nonce: row.nonce,
    browserBinding: row.browser_binding,
    expiresAt: row.expires_at,
    createdAt: row.created_at,
  };
}
