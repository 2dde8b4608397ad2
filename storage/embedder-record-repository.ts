import { sql, type Kysely } from 'kysely';
import type { EmbedderRecord, EmbedderRecordStore } from '../runtime/ports.js';
import type { DatabaseSchema } from './database-schema.js';
import { vectorText } from './memory-repository.js';
import { databaseCalls } from './database-calls.js';

/** The one-row `memory_embedder` table behind the runtime's EmbedderRecordStore port. */
export function createEmbedderRecordRepository(db: Kysely<DatabaseSchema>): EmbedderRecordStore {
  async function get(): Promise<EmbedderRecord | undefined> {
    const row = await db.selectFrom('memory_embedder').select(['source', 'model']).executeTakeFirst();
    return row && toRecord(row);
  }

  async function recordInForce(): Promise<EmbedderRecord> {
    const recorded = await get();
    if (!recorded) throw new Error('the memory embedder record vanished while it was being read');
    return recorded;
  }

  return databaseCalls<EmbedderRecordStore>({
    get,

    async record(embedder: EmbedderRecord): Promise<EmbedderRecord> {
      // A recorded embedder is replaced only while there is no memory its vectors would mix with.
      return (await writeRecord(db, embedder, { onlyWithoutMemories: true })) ?? (await recordInForce());
    },

    async recordFirst(embedder: EmbedderRecord): Promise<EmbedderRecord> {
      // One statement: of processes recording together, the first one's choice stands.
      const { rows } = await sql<{ source: string; model: string | null }>`
        insert into memory_embedder (id, source, model) values (true, ${embedder.source}, ${embedder.model})
        on conflict (id) do nothing
        returning source, model`.execute(db);
      return rows[0] ? toRecord(rows[0]) : await recordInForce();
    },
  });
}

/** Writes the one row (`onlyWithoutMemories`: an embedder already recorded stays while memories exist); returns it, or undefined when it stayed. */
async function writeRecord(db: Kysely<DatabaseSchema>, embedder: EmbedderRecord, { onlyWithoutMemories }: { onlyWithoutMemories: boolean }): Promise<EmbedderRecord | undefined> {
  const { rows } = await sql<{ source: string; model: string | null }>`
    insert into memory_embedder (id, source, model) values (true, ${embedder.source}, ${embedder.model})
    on conflict (id) do update
      set source = excluded.source, model = excluded.model, recorded_at = now()
      ${onlyWithoutMemories ? sql`where not exists (select 1 from memories)` : sql``}
    returning source, model`.execute(db);
  return rows[0] && toRecord(rows[0]);
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
      // One statement per batch.
      const replaced = rows.map((row, index) => sql`(${row.id}::int, ${vectorText(vectors[index] ?? [])}::vector)`);
      await sql`update memories set embedding = replaced.embedding from (values ${sql.join(replaced)}) as replaced (id, embedding) where memories.id = replaced.id`.execute(trx);
      done += rows.length;
      afterId = rows.at(-1)!.id;
      options.onProgress?.(done, Number(count));
    }
    await writeRecord(trx, embedder, { onlyWithoutMemories: false });
    return done;
  });
}
