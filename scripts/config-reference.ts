// `npm run docs:config [-- --check]`: writes docs/configuration.md from the convict schema
// (config/schema.ts) and the tool-server schema (config/mcp-server-schema.ts), and .env.example
// from the convict schema. With --check it writes nothing and exits 1 when either file is not
// what it would generate.
import { readFile, writeFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { BUDGET_DOCS, BUDGET_ENV, BUDGET_NAMES } from '../config/budget-schema.js';
import { McpServerSchema, McpServersSchema } from '../config/mcp-server-schema.js';
import { configSchema } from '../config/schema.js';

/** The generated reference. */
export const CONFIG_REFERENCE_FILE = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));

/** The generated list of environment variables, at the repository's root. */
export const ENV_EXAMPLE_FILE = fileURLToPath(new URL('../.env.example', import.meta.url));

/** Environment names read in place of a schema variable when that one is not set (config/load-config.ts). */
export const ENV_ALIASES: Record<string, string> = { APP_PORT: 'PORT' };

/** One intro per top-level section of the schema; a new section without one stops the generator. */
const SECTION_INTROS: Record<string, string> = {
  app: 'The HTTP server: where it listens, what it accepts, how many worker processes share the port and how long a graceful shutdown may take. See [deployment.md](deployment.md).',
  llm: 'The OpenAI-compatible LLM server the agent talks to, and the defaults of each request to it.',
  database: 'Storage: a PostgreSQL server when `DB_URL` is set, else the embedded database (PGlite) in `DATA_DIR`. Several workers or instances need PostgreSQL.',
  memory: 'Whose conversation a request is when it names no user, the short-term context, and long-term vector memory. See [sessions-and-memory.md](sessions-and-memory.md).',
  state: 'The agent\'s state graph (check a file with `svc-agent graph validate` or `npm run graph:validate`) and the bound on tool rounds in one turn.',
  sessions: 'Session actors kept in memory, how long a request waits for a busy session or a failing write, and the lease that serialises a session\'s turns across processes on PostgreSQL.',
  limits: 'Per-user limits on chat requests, counted per instance (all its workers together). Past them the answer is 429 with `Retry-After`.',
  budgets:
    'Per-user token budgets, counted in the database across every worker and instance. No budget set (the default): nothing is counted. See [deployment.md](deployment.md#token-budgets).',
  metrics: 'Prometheus metrics. See [deployment.md](deployment.md#metrics-and-health).',
  inspect: 'The session inspector page, and the connection to an external XState inspector.',
  log: 'The log: one line per entry on standard output, as text or as JSON for a log pipeline; each line of a request carries its ids. Secrets and message bodies are never logged at `info`. See [deployment.md](deployment.md#logs).',
  tools: 'Time-outs of the MCP tool servers (the servers themselves are listed under `mcp_servers`). See [mcp-servers.md](mcp-servers.md).',
  oauth: 'The identity provider where users connect their accounts for per-user tools. See [oauth.md](oauth.md).',
  auth: 'API keys. See [api.md](api.md#api-keys).',
  agents: 'The `/v1/agents` endpoints.',
  responses: 'The Responses API\'s background responses: how long the events of one are kept, so that its stream can be read again after it ended. See [api.md](api.md#background-responses).',
  mcp_servers: 'Tool servers, by name. They are set in the deployment file only: there is no environment variable. See [mcp-servers.md](mcp-servers.md).',
  webhooks: 'Which webhook targets are accepted and how deliveries are retried. See [api.md](api.md#webhooks).',
  tracing: 'OpenTelemetry traces, read from OpenTelemetry\'s own variables: off unless an OTLP endpoint is set (then a span per request, turn, LLM call and tool call, with the GenAI semantic conventions). See [protocols.md](protocols.md#opentelemetry-traces-for-jaeger-langfuse-tempo).',
};

/** What each convict format accepts; a format not listed here stops the generator. */
const FORMATS = new Map<unknown, string>([
  [String, 'string'],
  [Boolean, '`true` or `false`'],
  [Object, 'object'],
  ['port', 'port number (0 to 65535)'],
  ['nat', 'integer ≥ 0'],
  ['positive-int', 'integer ≥ 1'],
  ['temperature', 'number from 0 to 2'],
  ['ef-search', 'integer from 1 to 1000'],
  ['shared-buffers-mb', 'integer from 1 to 1024'],
  ['word-list', 'list of words (comma-separated in the environment)'],
  ['http-url', 'http(s) URL'],
  ['optional-http-url', 'empty, or an http(s) URL'],
  ['trace-url', 'empty, or an http(s) URL with `{trace_id}` in it'],
  ['ratio', 'number from 0 to 1'],
  ['database-url', 'empty, or `postgres://<user>:<password>@<host>:<port>/<database>`'],
]);

/** What each field of a tool server entry is for; used when the zod schema carries no description. */
const MCP_FIELD_DOCS: Record<string, string> = {
  transport: '`stdio`: the service starts the server as a child process and talks over its stdin/stdout. `http`: the server listens at `url` (MCP streamable HTTP).',
  command: 'Program to start (looked up on `PATH`).',
  args: 'Its arguments.',
  env: 'Environment variables of the process, added to a small safe set (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`); the service\'s own environment is not passed on.',
  cwd: 'Working directory of the process.',
  url: 'The server\'s MCP endpoint.',
  headers: 'HTTP headers sent with every request (e.g. a static `Authorization`).',
  per_user: 'Each user gets their own connection, made with their access token from the connected account (stdio: `MCP_USER_ACCESS_TOKEN` and `ACCESS_TOKEN` in the environment; http: `Authorization: Bearer`).',
  timeout_ms: 'Time-out of one tool call on this server, in ms; default `tools.call_timeout_ms`.',
  require_approval:
    'Which calls of this server\'s tools wait for the user\'s approval before they run: `never`, `always`, or a list of its tools by their name on the server (e.g. `[get-sum]`, not `everything__get-sum`). A listed name the server does not offer is logged as a warning. See [mcp-servers.md](mcp-servers.md#tool-approvals).',
  idempotent:
    'Every tool of this server may run again with the same arguments to no further effect: an approved call whose process died while it ran is run again, instead of the model being told its outcome is unknown. Tools may say so themselves (MCP annotations `readOnlyHint`, `idempotentHint`). See [mcp-servers.md](mcp-servers.md#idempotency-keys).',
};

type Leaf = { doc?: string; format?: unknown; default?: unknown; env?: string; sensitive?: boolean };

/** One setting of the schema, as the reference and .env.example show it. */
type SettingRow = {
  key: string;
  env: string | undefined;
  defaultText: string;
  /** The default as the environment variable's value; empty for a sensitive setting. */
  envDefault: string;
  /** Sensitive, with a default that is not empty (and not shown). */
  hidesDefault: boolean;
  format: string;
  doc: string;
};

/** Every setting of the convict schema by dotted key, in schema order. */
function listSettings(): SettingRow[] {
  const rows: SettingRow[] = [];
  const walk = (node: Record<string, unknown>, path: string[]) => {
    for (const [name, child] of Object.entries(node)) {
      const key = [...path, name];
      // convict's own rule: an object with a `default` is a setting, any other object a group.
      if (child !== null && typeof child === 'object' && !('default' in child)) walk(child as Record<string, unknown>, key);
      else rows.push(toRow(key.join('.'), child as Leaf));
    }
  };
  walk(configSchema as Record<string, unknown>, []);
  return rows;
}

/** The text of docs/configuration.md. */
export function renderConfigReference(): string {
  const settings = listSettings();
  const sections = [...new Set(settings.map((row) => row.key.split('.')[0]!))];
  const missing = sections.filter((section) => !SECTION_INTROS[section]);
  if (missing.length > 0) throw new Error(`config-reference: write an intro for section(s) ${missing.join(', ')} in SECTION_INTROS`);
  const parts = [
    HEADER,
    `Sections: ${sections.map((section) => `[${section}](#${section})`).join(' · ')}`,
    ...sections.map((section) => renderSection(section, settings.filter((row) => row.key.split('.')[0] === section))),
  ];
  return `${parts.join('\n\n')}\n`;
}

const HEADER = `# Configuration reference

<!-- Generated by \`npm run docs:config\` from config/schema.ts and config/mcp-server-schema.ts. Do not edit by hand: change the schema and regenerate (\`npm test\` fails while this file is stale). -->

## Where settings come from

A setting takes its value from the last of these that sets it:

1. its default in the schema (the tables below);
2. the YAML deployment file named by \`CONFIG_FILE\`, else the repository's \`config/default.yaml\`
   (keys nest as in the tables: \`llm.base_url\` is \`base_url\` under \`llm:\`);
3. its environment variable.

\`PORT\` is read as \`APP_PORT\` when \`APP_PORT\` is not set. Environment values are text:
booleans are \`true\` or \`false\`, numbers are plain digits (\`30000\`, not \`30s\`).
[\`.env.example\`](../.env.example), generated with this page, lists every environment variable
with its default, commented out, to copy into an environment file.

Start-up stops with a \`Configuration error:\` line naming the key (exit code 78) when a value
does not fit its format, when the deployment file has a key the schema does not know, or when
settings do not fit together: \`app.workers\` above 1 without \`database.url\`, an OAuth issuer
without a client id or token key (see [oauth.md](oauth.md)), or a word in both
\`tools.approval_words\` and \`tools.denial_words\`. Sensitive settings are shown here
only as set or empty.

\`\`\`yaml
# e.g. /etc/svc-agent/deployment.yaml, started with CONFIG_FILE=/etc/svc-agent/deployment.yaml
app:
  public_url: https://agents.example.com
llm:
  base_url: http://gpu-box:30000/v1
  model: qwen2.5-7b-instruct
memory:
  use_long_term: true
\`\`\``;

function renderSection(section: string, rows: SettingRow[]): string {
  const table = [
    '| key | environment | default | format | what |',
    '| --- | --- | --- | --- | --- |',
    ...rows.map((row) =>
      `| \`${row.key}\` | ${envCell(row.env)} | ${row.defaultText} | ${row.format} | ${cell(row.doc)} |`,
    ),
  ].join('\n');
  const parts = [`## ${section}`, SECTION_INTROS[section]!, table];
  if (section === 'mcp_servers') parts.push(renderMcpServerFields());
  if (section === 'budgets') parts.push(renderBudgetFields());
  return parts.join('\n\n');
}

/** The budgets of `budgets.default` and `budgets.users.<user_id>`, with the default's variables. */
function renderBudgetFields(): string {
  const rows = BUDGET_NAMES.map((name) => `| \`${name}\` | \`${BUDGET_ENV[name]}\` | \`0\` (no limit) | integer ≥ 0 | ${cell(BUDGET_DOCS[name])} |`);
  const table = ['| budget | environment (the default\'s) | default | format | what |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
  return [
    '### Fields of `budgets.default` and `budgets.users.<user_id>`',
    "A user's entry replaces only the budgets it sets; `0` there lifts the default's limit for that user. Unknown fields are refused.",
    table,
    BUDGETS_EXAMPLE,
  ].join('\n\n');
}

const BUDGETS_EXAMPLE = `\`\`\`yaml
budgets:
  default:
    tokens_per_day: 200000
    tokens_per_turn: 20000
  users:
    alice:
      tokens_per_day: 1000000
\`\`\``;

/** The fields of one `mcp_servers.<name>` entry, from the zod schema's JSON Schema. */
function renderMcpServerFields(): string {
  const variants = (z.toJSONSchema(McpServerSchema, { io: 'input' }) as JsonSchema).oneOf ?? [];
  const fields = new Map<string, { transports: string[]; required: boolean; schema: JsonSchema }>();
  for (const variant of variants) {
    const transport = String(variant.properties?.transport?.const);
    for (const [name, schema] of Object.entries(variant.properties ?? {})) {
      const field = fields.get(name) ?? { transports: [], required: false, schema };
      field.transports.push(transport);
      field.required ||= (variant.required ?? []).includes(name);
      fields.set(name, field);
    }
  }
  const allTransports = variants.length;
  const rows = [...fields].map(([name, { transports, required, schema }]) => {
    const doc = schema.description ?? MCP_FIELD_DOCS[name];
    if (!doc) throw new Error(`config-reference: describe mcp_servers field "${name}" in MCP_FIELD_DOCS`);
    const applies = transports.length === allTransports ? 'all' : transports.map((transport) => `\`${transport}\``).join(', ');
    const defaultText = required ? 'required' : schema.default !== undefined ? `\`${JSON.stringify(schema.default)}\`` : 'not set';
    return `| \`${name}\` | ${applies} | ${defaultText} | ${jsonSchemaFormat(name, schema)} | ${cell(doc)} |`;
  });
  const namePattern = (z.toJSONSchema(McpServersSchema) as JsonSchema).propertyNames?.pattern;
  const table = ['| field | transport | default | format | what |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
  return [
    '### Fields of `mcp_servers.<name>`',
    `A server's name matches \`${namePattern}\`; its tools are offered to the LLM as \`<name>__<tool>\`. Unknown fields are refused.`,
    table,
    MCP_EXAMPLE,
  ].join('\n\n');
}

const MCP_EXAMPLE = `\`\`\`yaml
mcp_servers:
  everything:
    transport: stdio
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything"]
    require_approval: [get-sum]
  search:
    transport: http
    url: https://mcp.example.com/mcp
    headers: { Authorization: "Bearer <token>" }
    timeout_ms: 30000
\`\`\``;

type JsonSchema = {
  type?: string;
  const?: unknown;
  default?: unknown;
  description?: string;
  format?: string;
  minLength?: number;
  exclusiveMinimum?: number;
  pattern?: string;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  properties?: Record<string, JsonSchema>;
  propertyNames?: JsonSchema;
  required?: string[];
  oneOf?: JsonSchema[];
};

function jsonSchemaFormat(name: string, schema: JsonSchema): string {
  if (name === 'transport') return '`stdio` or `http`';
  if (name === 'require_approval') return '`never`, `always`, or a list of tool names';
  if (schema.type === 'string' && schema.format === 'uri') return 'http(s) URL';
  if (schema.type === 'string') return schema.minLength ? 'non-empty string' : 'string';
  if (schema.type === 'boolean') return '`true` or `false`';
  if (schema.type === 'integer' && schema.exclusiveMinimum === 0) return 'integer ≥ 1';
  if (schema.type === 'array' && schema.items?.type === 'string') return 'list of strings';
  if (schema.type === 'object' && typeof schema.additionalProperties === 'object' && schema.additionalProperties.type === 'string') {
    return 'map of strings';
  }
  throw new Error(`config-reference: describe the format of mcp_servers field "${name}" (${JSON.stringify(schema)})`);
}

function toRow(key: string, leaf: Leaf): SettingRow {
  const format = FORMATS.get(leaf.format) ?? (Array.isArray(leaf.format) ? `one of ${leaf.format.map((value) => `\`${value}\``).join(', ')}` : undefined);
  if (format === undefined) throw new Error(`config-reference: describe format ${String(leaf.format)} of ${key} in FORMATS`);
  if (!leaf.doc) throw new Error(`config-reference: ${key} has no doc in config/schema.ts`);
  return {
    key,
    env: leaf.env,
    defaultText: defaultText(key, leaf),
    envDefault: leaf.env ? envDefault(key, leaf) : '',
    hidesDefault: Boolean(leaf.sensitive) && leaf.default !== '',
    format,
    doc: leaf.doc,
  };
}

/**
 * The default as the environment variable would give it, quoted for a shell where needed.
 * Sensitive settings are left empty.
 */
function envDefault(key: string, leaf: Leaf): string {
  const value = leaf.default;
  if (leaf.sensitive) return '';
  if (Array.isArray(value)) {
    // The list formats (word-list, convict's Array) split the variable at commas.
    if (value.some((item) => typeof item !== 'string' || item.includes(','))) {
      throw new Error(`config-reference: the default of ${key} cannot be written as a comma-separated list`);
    }
    return shellQuoted(value.join(','));
  }
  // convict's Object format reads the variable as JSON.
  if (value !== null && typeof value === 'object') return shellQuoted(JSON.stringify(value));
  return shellQuoted(String(value));
}

/**
 * The value as a shell, systemd's EnvironmentFile and docker compose all read it: bare when it
 * has no character any of them treats specially, else in single quotes (double quotes when it
 * holds a single quote).
 */
function shellQuoted(value: string): string {
  if (/^[\w.,:/@%+=-]*$/.test(value)) return value;
  if (!value.includes("'")) return `'${value}'`;
  return `"${value.replace(/["\\$`]/g, (character) => `\\${character}`)}"`;
}

function defaultText(key: string, leaf: Leaf): string {
  const value = leaf.default;
  if (value === '') return 'empty';
  if (leaf.sensitive) return 'set (sensitive)';
  if (typeof value === 'number' && key.endsWith('_ms') && value >= 1000) return `\`${value}\` (${humanDuration(value)})`;
  if (typeof value === 'object') return `\`${JSON.stringify(value)}\``;
  return `\`${cell(String(value))}\``;
}

function humanDuration(ms: number): string {
  const units: Array<[number, string]> = [
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1000, 's'],
  ];
  const [size, unit] = units.find(([size]) => ms % size === 0) ?? [1000, 's'];
  return `${ms / size} ${unit}`;
}

function envCell(env: string | undefined): string {
  if (!env) return '(file only)';
  const alias = ENV_ALIASES[env];
  return alias ? `\`${env}\` (or \`${alias}\`)` : `\`${env}\``;
}

/** Text made safe for a Markdown table cell. */
function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** The text of .env.example: every environment variable the configuration reads, by section, commented out. */
export function renderEnvExample(): string {
  // `budgets` is one setting in the schema; its default budgets have a variable each.
  const settings = listSettings()
    .flatMap((row) => (row.key === 'budgets' ? budgetEnvRows() : [row]))
    .filter((row) => row.env);
  const sections = [...new Set(settings.map((row) => row.key.split('.')[0]!))];
  const parts = [
    ENV_HEADER,
    ...sections.map((section) =>
      [
        `# --- ${section} (docs/configuration.md#${section}) ---`,
        ...settings.filter((row) => row.key.split('.')[0] === section).map(renderEnvVariable),
      ].join('\n\n'),
    ),
  ];
  return `${parts.join('\n\n')}\n`;
}

/** The default budgets' variables, as the settings of `budgets.default` they stand for. */
function budgetEnvRows(): SettingRow[] {
  return BUDGET_NAMES.map((name) => ({
    key: `budgets.default.${name}`,
    env: BUDGET_ENV[name],
    defaultText: '`0`',
    envDefault: '0',
    hidesDefault: false,
    format: 'integer ≥ 0',
    doc: `${BUDGET_DOCS[name]} 0: no limit.`,
  }));
}

const ENV_HEADER = `# svc-agent: every environment variable the configuration reads, with its default.
# Generated by \`npm run docs:config\` from config/schema.ts: do not edit by hand. Each setting's
# format and details: docs/configuration.md.
#
# Every line is commented out, so this file as it stands changes nothing. Copy it to .env
# (chmod 600: it will hold secrets) and uncomment only what you set: the environment wins over
# the deployment file, and a variable set to nothing (NAME=) does not mean its default.
# Sensitive settings are left empty here. Tool servers (mcp_servers) have no variable: they
# go in the deployment file.
#
# The service does not read .env itself. Hand it the variables in one of these ways:
#   shell:   set -a; . ./.env; set +a; npm start
#   systemd: EnvironmentFile=/etc/svc-agent/svc-agent.env in the unit (docs/deployment.md)
#   docker:  docker run --env-file .env … (it takes values literally: drop the quotes)

# --- deployment file ---

# YAML file of settings (keys as in docs/configuration.md), read before the environment.
# Empty or not set: the config/default.yaml that comes with the service.
# CONFIG_FILE=`;

function renderEnvVariable(row: SettingRow): string {
  const aliases = Object.entries(ENV_ALIASES).filter(([variable]) => variable === row.env);
  const comments = [
    ...wrapComment(row.doc),
    ...aliases.map(([variable, alias]) => `# ${alias} is read as ${variable} when ${variable} is not set.`),
    ...(row.hidesDefault ? ['# Sensitive: its default is not shown; left unset, the default applies.'] : []),
  ];
  return [...comments, `# ${row.env}=${row.envDefault}`].join('\n');
}

/** The text as comment lines of at most about 100 characters. */
function wrapComment(text: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/)) {
    if (line !== '#' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  lines.push(line);
  return lines;
}

/** The files this script generates, each with its renderer. */
const GENERATED: Array<{ file: string; render: () => string }> = [
  { file: CONFIG_REFERENCE_FILE, render: renderConfigReference },
  { file: ENV_EXAMPLE_FILE, render: renderEnvExample },
];

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { check: { type: 'boolean' } } });
  let stale = 0;
  for (const { file, render } of GENERATED) {
    const expected = render();
    const shown = relative(process.cwd(), file);
    if (values.check) {
      const actual = await readFile(file, 'utf8').catch(() => '');
      if (actual === expected) {
        console.log(`${shown} is current`);
      } else {
        console.error(`${shown} is out of date with config/schema.ts: run npm run docs:config`);
        stale += 1;
      }
      continue;
    }
    await writeFile(file, expected);
    console.log(`wrote ${shown}`);
  }
  return stale > 0 ? 1 : 0;
}

// Run as a script, not when a test imports the generator.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
