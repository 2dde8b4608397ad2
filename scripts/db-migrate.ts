/** `svc-agent db migrate` (`npm run db:migrate`): brings the database schema up to date and says what it did. */
import { ConfigError, loadConfig } from '../config/load-config.js';
import { createDatabase, migrateToLatest, redactPassword } from '../storage/index.js';

/** Migrates the database `env` configures; resolves to the exit code (78: a configuration error). */
export async function runDbMigrate(env: NodeJS.ProcessEnv): Promise<number> {
  let config;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`Configuration error: ${error.message}`);
    return 78;
  }
  const { url, data_dir: dataDir, pool_size: poolSize, embedded_shared_buffers_mb: sharedBuffersMb } = config.database;
  const vector = config.memory.use_long_term;
  const embeddingDimensions = config.memory.embedding_dimensions;

  const target = url ? `the database at ${redactPassword(url)}` : `the embedded PGlite database in ${dataDir}`;
  try {
    const database = await createDatabase({ url, dataDir, vector, poolSize, sharedBuffersMb });
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
    return 1;
  }
  return 0;
}
