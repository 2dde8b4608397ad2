import { createServerSchema } from '../support/server-schema.js';

/** The database of a fault test's service: environment for `startTestService`, and what removes it. */
export type FaultDatabase = { env: NodeJS.ProcessEnv; drop(): Promise<void> };

/**
 * A fresh schema on the PostgreSQL server when TEST_DATABASE_URL names one (as in CI), so
 * the service runs on the database a deployment uses; otherwise the embedded default.
 */
export async function openFaultDatabase(prefix: string): Promise<FaultDatabase> {
  const serverUrl = process.env.TEST_DATABASE_URL;
  if (!serverUrl) return { env: {}, drop: async () => {} };
  const schema = await createServerSchema(serverUrl, prefix);
  return { env: { DB_URL: schema.url }, drop: schema.drop };
}
