import { sql } from 'kysely';
import type { Kysely, Selectable } from 'kysely';
import type { NewStoredToken, StoredToken, TokenStore } from '../runtime/ports.js';
import type { DatabaseSchema, OAuthTokensTable } from './database-schema.js';
import { databaseCalls } from './database-calls.js';

/** The oauth_tokens table behind the runtime's TokenStore port. */
export function createTokenRepository(db: Kysely<DatabaseSchema>): TokenStore {
  return databaseCalls<TokenStore>({
    async get(userId: string, provider: string): Promise<StoredToken | undefined> {
      const row = await db
        .selectFrom('oauth_tokens')
        .selectAll()
        .where('user_id', '=', userId)
        .where('provider', '=', provider)
        .executeTakeFirst();
      return row && toRecord(row);
    },

    async listByUser(userId: string): Promise<StoredToken[]> {
      const rows = await db.selectFrom('oauth_tokens').selectAll().where('user_id', '=', userId).orderBy('provider').execute();
      return rows.map(toRecord);
    },

    async put(token: NewStoredToken): Promise<StoredToken> {
      const row = await db
        .insertInto('oauth_tokens')
        .values(toValues(token))
        .onConflict((conflict) =>
          conflict.columns(['user_id', 'provider']).doUpdateSet({
            ciphertext: (eb) => eb.ref('excluded.ciphertext'),
            expires_at: (eb) => eb.ref('excluded.expires_at'),
            scope: (eb) => eb.ref('excluded.scope'),
            created_at: sql<Date>`now()`,
            updated_at: sql<Date>`now()`,
          }),
        )
        .returningAll()
        .executeTakeFirstOrThrow();
      return toRecord(row);
    },

    async replace(expectedCiphertext: string, token: NewStoredToken): Promise<boolean> {
      const result = await db
        .updateTable('oauth_tokens')
        .set({ ciphertext: token.ciphertext, expires_at: token.expiresAt, scope: token.scope, updated_at: sql<Date>`now()` })
        .where('user_id', '=', token.userId)
        .where('provider', '=', token.provider)
        .where('ciphertext', '=', expectedCiphertext)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async remove(userId: string, provider: string, expectedCiphertext?: string): Promise<boolean> {
      let query = db.deleteFrom('oauth_tokens').where('user_id', '=', userId).where('provider', '=', provider);
      if (expectedCiphertext !== undefined) query = query.where('ciphertext', '=', expectedCiphertext);
      const result = await query.executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  });
}

function toValues(token: NewStoredToken) {
  return {
    user_id: token.userId,
    provider: token.provider,
    ciphertext: token.ciphertext,
    expires_at: token.expiresAt,
    scope: token.scope,
  };
}

function toRecord(row: Selectable<OAuthTokensTable>): StoredToken {
  return {
    userId: row.user_id,
    provider: row.provider,
    ciphertext: row.ciphertext,
    expiresAt: row.expires_at,
    scope: row.scope,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
