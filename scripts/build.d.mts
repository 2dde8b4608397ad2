/** Types of scripts/build.mjs, for the tests. */
export declare const PACKAGE_ROOT: string;
export declare function ensureBuilt(root?: string, compile?: (root: string) => void): boolean;
export declare function sourcesDigest(root: string): string;
