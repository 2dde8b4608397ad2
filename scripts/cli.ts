/** The `svc-agent` command's subcommands (run through scripts/svc-agent.mjs). */
import { readFileSync } from 'node:fs';
import { packageFile } from '../config/package-files.js';

/** A subcommand: the words that name it, its usage and help, and what runs it (imported only then, so `--help` stays fast). */
type Command = {
  words: string[];
  usage: string;
  summary: string;
  /** Its `--help` text; a command without one reads its arguments (and --help) itself. */
  help?: string;
  /** Resolves to the exit code; without one (`start`) the process runs on until it is stopped. */
  run(args: string[]): Promise<number | undefined>;
};

const SETTINGS = 'Settings: the deployment file CONFIG_FILE names (else the bundled config/default.yaml),\nthen the environment; every key is in docs/configuration.md.';
const CHECKOUT = 'In a checkout, npm start and npm run graph:validate -- …, db:migrate, memory:reembed run these.';

const COMMANDS: Command[] = [
  {
    words: ['start'],
    usage: 'svc-agent [start]',
    summary: 'start the service',
    help: `Starts the service; SIGTERM or SIGINT stops it gracefully (exit 0). A configuration error\nexits with 78 and one line naming the key. In a checkout: npm start.\n${SETTINGS}`,
    run: async () => {
      // Runs on import: it starts the service and handles the signals.
      await import('../gateway/server/main.js');
      return undefined;
    },
  },
  {
    words: ['graph', 'validate'],
    usage: 'svc-agent graph validate [FILE] [--mermaid] [--html OUT] [--svg OUT]',
    summary: 'check a state graph file, draw it',
    run: async (args) => (await import('./graph-validate.js')).runGraphValidate(args),
  },
  {
    words: ['db', 'migrate'],
    usage: 'svc-agent db migrate',
    summary: 'bring the database schema up to date',
    help: `Applies the migrations the service applies at start-up, to the database of DB_URL (else the\nembedded one in DATA_DIR), and says what it applied. In a checkout: npm run db:migrate.\n${SETTINGS}`,
    run: async () => (await import('./db-migrate.js')).runDbMigrate(process.env),
  },
  {
    words: ['memory', 'reembed'],
    usage: 'svc-agent memory reembed',
    summary: 'embed the stored long-term memories again',
    help: `Embeds every stored long-term memory again with the configured embedder (MEMORY_EMBEDDINGS,\nLLM_EMBEDDING_MODEL) and records it, so the service starts with it. Run it with the service\nstopped. In a checkout: npm run memory:reembed.\n${SETTINGS}`,
    run: async () => (await import('./memory-reembed.js')).runMemoryReembed(process.env),
  },
];

/** Where the summaries start in `--help`. */
const COLUMN = 27;
const OTHERS: Array<[string, string]> = [
  ['svc-agent --version', 'print the version'],
  ['svc-agent --help', "this text; svc-agent COMMAND --help: one command's"],
];
const USAGE = [...COMMANDS.map(({ usage, summary }): [string, string] => [usage, summary]), ...OTHERS]
  .map(([usage, summary], index) => {
    const lead = index === 0 ? 'usage: ' : '       ';
    return usage.length < COLUMN ? `${lead}${usage.padEnd(COLUMN)}${summary}` : `${lead}${usage}\n${' '.repeat(lead.length + COLUMN)}${summary}`;
  })
  .join('\n');

/** Runs the command line `argv` (without node and the script); resolves to the exit code, if the command has one. */
async function runCommandLine(argv: string[]): Promise<number | undefined> {
  const [first] = argv;
  if (first === '--version' || first === '-v') {
    const { version } = JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string };
    console.log(version);
    return 0;
  }
  if (first === '--help' || first === '-h') {
    console.log(`${USAGE}\n\n${SETTINGS}\n${CHECKOUT}`);
    return 0;
  }
  const words = argv.length === 0 ? ['start'] : argv;
  const command = COMMANDS.find((candidate) => candidate.words.every((word, index) => words[index] === word));
  if (!command) {
    console.error(`svc-agent: unknown command '${words.join(' ')}'\n${USAGE}`);
    return 2;
  }
  const args = words.slice(command.words.length);
  if (command.help === undefined) return command.run(args);
  if (args.length === 1 && (args[0] === '--help' || args[0] === '-h')) {
    console.log(`usage: ${command.usage}\n${command.help}`);
    return 0;
  }
  if (args.length > 0) {
    console.error(`svc-agent ${command.words.join(' ')}: unexpected argument '${args.join(' ')}'\nusage: ${command.usage}`);
    return 2;
  }
  return command.run(args);
}

const code = await runCommandLine(process.argv.slice(2));
if (code !== undefined) process.exitCode = code;
