/**
 * `npm run db:migrate`: brings the database schema up to date and says what it did.
 * TODO: read these settings through the config loader (config/) once it is wired in.
 */
import { createDatabase, migrateToLatest, redactPassword } from '../storage/index.js';

const env = process.env;
const url = env.DB_URL?.trim() || undefined;
const dataDir = env.DATA_DIR?.trim() || './data';
const vector = /^(true|1|yes|on)$/i.test(env.MEMORY_USE_LONG_TERM?.trim() ?? '');
const embeddingDimensions = Number(env.MEMORY_EMBEDDING_DIMENSIONS?.trim() || 256);

const target = url ? `the database at ${redactPassword(url)}` : `the embedded PGlite database in ${dataDir}`;
try {
  const database = await createDatabase({ url, dataDir, vector });
  try {
    const { applied } = await migrateToLatest(database, { vector, embeddingDimensions });
    const memory = vector ? `long-term memory on (${embeddingDimensions} dimensions)` : 'long-term memory off';
    console.log(`Migrated ${target}, ${memory}.`);
    console.log(applied.length > 0 ? `Applied: ${applied.join(', ')}` : 'Already up to date: nothing applied.');
  } finally {
    await database.close();
  }
} catch (error) {
  console.error(`Migrating ${target} failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
