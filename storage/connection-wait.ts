import type { Dialect } from 'kysely';

/**
 * `dialect` whose driver tells `onWait` how long, in ms, each query waited for its connection
 * (a `pg` pool's free connection, PGlite's one backend): the queueing before the database
 * sees a query. Without `onWait`, `dialect` itself.
 */
export function withConnectionWait(dialect: Dialect, onWait: ((durationMs: number) => void) | undefined): Dialect {
  if (!onWait) return dialect;
  return {
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createDriver() {
      const driver = dialect.createDriver();
      const acquire = driver.acquireConnection.bind(driver);
      driver.acquireConnection = async () => {
        const started = performance.now();
        const connection = await acquire();
        onWait(performance.now() - started);
        return connection;
      };
      return driver;
    },
  };
}
