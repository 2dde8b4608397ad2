import { sql, type Kysely } from 'kysely';
import type { EmbedderRecord, EmbedderRecordStore } from '../runtime/ports.js';
import type { DatabaseSchema } from './database-schema.js';
import { vectorText } from './memory-repository.js';

/** The one-row `memory_embedder` table behind the runtime's EmbedderRecordStore port. */
export function createEmbedderRecordRepository(db: Kysely<DatabaseSchema>): EmbedderRecordStore {
  async function get(): Promise<EmbedderRecord | undefined> {
    const row = await db.selectFrom('memory_embedder').select(['source', 'model']).executeTakeFirst();
    return row && toRecord(row);
  }

  return {
    get,

    async record(embedder: EmbedderRecord): Promise<EmbedderRecord> {
      // One statement, so of processes starting together the first one's choice stands; a
      // recorded embedder is replaced only while there is no memory its vectors would mix with.
      const { rows } = await sql<{ source: string; model: string | null }>`
        insert into memory_embedder as recorded (id, source, model) values (true, ${embedder.source}, ${embedder.model})
        on conflict (id) do update
          set source = excluded.source, model = excluded.model, recorded_at = now()
          where not exists (select 1 from memories)
        returning source, model`.execute(db);
      const row = rows[0];
      if (row) return toRecord(row);
      const recorded = await get();
      if (!recorded) throw new Error('the memory embedder record vanished while it was being read');
      return recorded;
    },
  };
}

function toRecord(row: { source: string; model: string | null }): EmbedderRecord {
  if (row.source !== 'llm' && row.source !== 'local') throw new Error(`memory_embedder names an unknown embedder source '${row.source}'`);
  return { source: row.source, model: row.model };
}

/** Progress of a re-embedding: memories done of all. */
export type ReembedProgress = (done: number, total: number) => void;

/**
 * Replaces the vector of every stored memory with `embed`'s of its text and records
 * `embedder` as the memories' embedder, in one transaction: a failure leaves every vector
 * and the record as they were. Memories written meanwhile wait for it (the table is locked
 * against writes), so none is left with the old embedder's vector. Returns how many it did.
 */
export async function reembedMemories(
  db: Kysely<DatabaseSchema>,
  embed: (texts: string[]) => Promise<number[][]>,
  embedder: EmbedderRecord,
  options: { batch?: number; onProgress?: ReembedProgress } = {},
): Promise<number> {
  const batch = options.batch ?? 64;
  return db.transaction().execute(async (trx) => {
    await sql`lock table memories in share row exclusive mode`.execute(trx);
    const { count } = await trx.selectFrom('memories').select(sql<number>`count(*)::int`.as('count')).executeTakeFirstOrThrow();
    let done = 0;
    for (let afterId = 0; ; ) {
      const rows = await trx.selectFrom('memories').select(['id', 'content']).where('id', '>', afterId).orderBy('id').limit(batch).execute();
      if (rows.length === 0) break;
      const vectors = await embed(rows.map((row) => row.content));
      for (const [index, row] of rows.entries()) {
        await trx.updateTable('memories').set({ embedding: vectorText(vectors[index] ?? []) }).where('id', '=', row.id).execute();
      }
      done += rows.length;
      afterId = rows.at(-1)!.id;
      options.onProgress?.(done, Number(count));
    }
    await sql`
      insert into memory_embedder (id, source, model) values (true, ${embedder.source}, ${embedder.model})
      on conflict (id) do update set source = excluded.source, model = excluded.model, recorded_at = now()`.execute(trx);
    return done;
  });
}
