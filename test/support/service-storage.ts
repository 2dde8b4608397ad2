import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServerSchema } from './server-schema.js';

/** Where an end-to-end test's service keeps its data: the embedded database, or the PostgreSQL server. */
export type StorageTarget = {
  name: string;
  /** Environment for a fresh, empty store; the same env reopens the same data. */
  prepare(): Promise<{ env: NodeJS.ProcessEnv; cleanup(): Promise<void> }>;
};

/** The embedded database in a temporary folder, and the PostgreSQL server when TEST_DATABASE_URL is set. */
export function serviceStorageTargets(): StorageTarget[] {
  const targets: StorageTarget[] = [
    {
      name: 'embedded PGlite',
      prepare: async () => {
        const dataDir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
        return { env: { DATA_DIR: join(dataDir, 'db') }, cleanup: async () => rmSync(dataDir, { recursive: true, force: true }) };
      },
    },
  ];
  const baseUrl = process.env.TEST_DATABASE_URL;
  if (baseUrl) {
    targets.push({
      name: 'PostgreSQL server',
      prepare: async () => {
        const schema = await createServerSchema(baseUrl, 'e2e', { vector: true });
        return { env: { DB_URL: schema.url }, cleanup: schema.drop };
      },
    });
  }
  return targets;
}
