import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The service's entry point, as `npm start` runs it. */
export const SERVICE_SCRIPT = 'scripts/svc-agent.mjs';

/**
 * The Node flags `npm start` gives the service: the words of `package.json`'s start script
 * between `node` and the entry point. The bench runs the processes under test with them, so
 * that it measures the service as users run it.
 */
export function startNodeFlags(root: string): string[] {
  const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  const words = (scripts?.start ?? '').trim().split(/\s+/);
  const entry = words.indexOf(SERVICE_SCRIPT);
  if (words[0] !== 'node' || entry < 0) throw new Error(`package.json's start script is not "node [flags] ${SERVICE_SCRIPT}": ${scripts?.start}`);
  return words.slice(1, entry);
}
