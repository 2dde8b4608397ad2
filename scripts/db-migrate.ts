/** `svc-agent db migrate` (`npm run db:migrate`): brings the database schema up to date and says what it did. */
import { ConfigError, loadConfig } from '../config/load-config.js';
import { databaseOptionsOf } from '../gateway/server/service.js';
import { createDatabase, describeDatabase, migrateToLatest } from '../storage/index.js';

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
  const options = databaseOptionsOf(config);
  const { vector } = options;
  const embeddingDimensions = config.memory.embedding_dimensions;

  const target = describeDatabase(options);
  try {
    const database = await createDatabase(options);
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
