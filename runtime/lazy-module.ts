/**
 * A third-party package (or a set of its modules) imported on first use, once. A service that
 * never uses it never loads it: its start-up does not pay for parsing it, and its memory does
 * not hold it. Only third-party code goes through here, never the service's own modules: under
 * the test runner (tsx's CommonJS hook) a dynamic `import()` of one of ours would load a second
 * copy of every module it imports, with its own classes and state; a package holds none of
 * ours. Code that uses a package this way takes every value of it from here (types may be
 * imported as usual), so that it meets one copy of the package's classes.
 */
export type LazyModule<T> = {
  /** Imports it on the first call; every call resolves to the same. */
  load(): Promise<T>;
  /** It, once a `load()` has resolved; undefined before (nothing made by it can exist yet). */
  readonly loaded: T | undefined;
};

/** A `LazyModule` that `importer` (dynamic `import()`s of the package's modules) loads. */
export function lazyModule<T>(importer: () => Promise<T>): LazyModule<T> {
  let loading: Promise<T> | undefined;
  let loaded: T | undefined;
  return {
    load() {
      loading ??= importer().then(
        (value) => (loaded = value),
        (error: unknown) => {
          // A failed import (a package missing from the install) is tried again by the next use.
          loading = undefined;
          throw error;
        },
      );
      return loading;
    },
    get loaded() {
      return loaded;
    },
  };
}
