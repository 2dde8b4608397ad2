import { expect } from 'chai';
import { Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type DatabaseConnection, type Dialect, type Driver } from 'kysely';
import { withConnectionWait } from '../../storage/connection-wait.js';

/** A driver with one connection that is free only after `busyMs`, answering every query with no rows. */
function slowDialect(busyMs: number): Dialect {
  const connection: DatabaseConnection = {
    executeQuery: async () => ({ rows: [] }),
    streamQuery: () => {
      throw new Error('not streamed');
    },
  };
  const driver: Driver = {
    init: async () => undefined,
    acquireConnection: () => new Promise((resolve) => setTimeout(() => resolve(connection), busyMs)),
    beginTransaction: async () => undefined,
    commitTransaction: async () => undefined,
    rollbackTransaction: async () => undefined,
    releaseConnection: async () => undefined,
    destroy: async () => undefined,
  };
  return {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => driver,
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  };
}

describe('withConnectionWait', () => {
  it('tells how long each query waited for its connection', async () => {
    const waits: number[] = [];
    const db = new Kysely<Record<string, never>>({ dialect: withConnectionWait(slowDialect(20), (durationMs) => waits.push(durationMs)) });
    try {
      await db.selectNoFrom((eb) => eb.val(1).as('one')).execute();
      await db.selectNoFrom((eb) => eb.val(2).as('two')).execute();
    } finally {
      await db.destroy();
    }
    expect(waits).to.have.length(2);
    for (const wait of waits) expect(wait).to.be.at.least(15);
  });

  it('is the dialect itself when nobody listens', () => {
    const dialect = slowDialect(0);
    expect(withConnectionWait(dialect, undefined)).to.equal(dialect);
  });
});
