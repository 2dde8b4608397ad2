/**
 * `svc-agent memory reembed` (`npm run memory:reembed`): embeds every stored long-term
 * memory again with the embedder the configuration asks for (memory.embeddings,
 * llm.embedding_model), and records it as the memories' embedder, so the service starts
 * with the new one. Run it with the service stopped: a running process would go on
 * embedding recalls with the old one.
 */
import { ConfigError, loadConfig } from '../config/load-config.js';
import { databaseOptionsOf, embedderOptionsOf } from '../gateway/server/service.js';
import { configuredEmbedder, recordOf } from '../runtime/llm/embedder.js';
import { createDatabase, describeDatabase, migrateToLatest, reembedMemories } from '../storage/index.js';

/** Re-embeds the memories in the database `env` configures; resolves to the exit code (78: a configuration error). */
export async function runMemoryReembed(env: NodeJS.ProcessEnv): Promise<number> {
  let config;
  try {
    config = loadConfig(env);
    if (!config.memory.use_long_term) throw new ConfigError('long-term memory is off (memory.use_long_term): there are no memories to embed');
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`Configuration error: ${error.message}`);
    return 78;
  }
  // use_long_term is on (checked above): the database opens with pgvector.
  const database = databaseOptionsOf(config);
  const target = describeDatabase(database);
  const options = embedderOptionsOf(config);
  try {
    const { embedder, reason } = await configuredEmbedder(options);
    const record = recordOf(embedder, options);
    console.log(`Embedding the memories in ${target} with ${record.source === 'llm' ? `the LLM server's model '${record.model}'` : 'the local embedder'} (${reason}).`);
    const opened = await createDatabase(database);
    try {
      await migrateToLatest(opened, { vector: true, embeddingDimensions: config.memory.embedding_dimensions });
      let reported = 0;
      const done = await reembedMemories(opened.db, (texts) => embedder.embed(texts), record, {
        onProgress: (count, total) => {
          if (count - reported >= 1000 || count === total) {
            reported = count;
            console.log(`  ${count} of ${total}`);
          }
        },
      });
      console.log(`Re-embedded ${done} memories; the service now starts with this embedder.`);
    } finally {
      await opened.close();
    }
  } catch (error) {
    console.error(`Re-embedding the memories in ${target} failed, nothing was changed: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
  return 0;
}
