/** The `svc-agent` command's subcommands (run through scripts/svc-agent.mjs). */
import { readFileSync } from 'node:fs';
import { packageFile } from '../config/package-files.js';

const USAGE = `usage: svc-agent [start]      start the service (settings: CONFIG_FILE and the environment, see docs/configuration.md)
       svc-agent --version
       svc-agent --help`;

const [command = 'start', ...rest] = process.argv.slice(2);
if (command === '--version' || command === '-v') {
  const { version } = JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string };
  console.log(version);
} else if (command === '--help' || command === '-h') {
  console.log(USAGE);
} else if (command === 'start' && rest.length === 0) {
  await import('../gateway/main.js');
} else {
  console.error(`svc-agent: unknown command '${[command, ...rest].join(' ')}'\n${USAGE}`);
  process.exitCode = 2;
}
