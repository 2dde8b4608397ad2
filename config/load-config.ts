import { existsSync } from 'node:fs';
import convict from 'convict';
import { parse as parseYaml } from 'yaml';
import { normaliseWord } from '../runtime/tools/approval-words.js';
import { packageFile } from './package-files.js';
import { budgetsOf, type BudgetsConfig } from './budget-schema.js';
import { McpServersSchema, type McpServerConfig } from './mcp-server-schema.js';
import { configSchema, registerFormats, type ConfigValues } from './schema.js';
import { tracesUrlOf } from './tracing-settings.js';

/** The repository's default deployment file, used when CONFIG_FILE is not set. */
export const DEFAULT_CONFIG_FILE = packageFile('config/default.yaml');

/** The service's settings, validated. */
export type AppConfig = Omit<ConfigValues, 'mcp_servers' | 'budgets'> & {
  mcp_servers: Record<string, McpServerConfig>;
  budgets: BudgetsConfig;
  /** The deployment file the settings were read from. */
  config_file: string;
};

/** A configuration that cannot start the service. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

let formatsRegistered = false;

/**
 * Reads the settings: schema defaults, then the YAML deployment file (`CONFIG_FILE`, else
 * the repository's default file), then the environment. Throws a ConfigError naming the
 * key of the first bad value.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  if (!formatsRegistered) {
    registerFormats();
    convict.addParser({ extension: ['yaml', 'yml'], parse: parseYaml });
    formatsRegistered = true;
  }
  const configFile = env.CONFIG_FILE || DEFAULT_CONFIG_FILE;
  if (!existsSync(configFile)) throw new ConfigError(`CONFIG_FILE: no such file ${configFile}`);
  const environment = withAliases(env);
  const config = convict(configSchema, { env: environment, args: [] });
  try {
    config.loadFile(configFile);
    config.validate({ allowed: 'strict' });
  } catch (error) {
    throw new ConfigError(firstLine(error));
  }
  const properties = config.getProperties();
  const servers = McpServersSchema.safeParse(properties.mcp_servers);
  if (!servers.success) {
    const issue = servers.error.issues[0]!;
    throw new ConfigError(`mcp_servers.${issue.path.join('.')}: ${issue.message}`);
  }
  const budgets = budgetsOf(properties.budgets, environment);
  if ('error' in budgets) throw new ConfigError(budgets.error);
  const approving = new Set(properties.tools.approval_words.map(normaliseWord));
  const both = properties.tools.denial_words.find((word) => approving.has(normaliseWord(word)));
  if (both !== undefined) {
    throw new ConfigError(`tools.denial_words: "${both}" is also in tools.approval_words: a word cannot both approve and refuse`);
  }
  if (properties.app.workers > 1 && !properties.database.url) {
    throw new ConfigError(
      `app.workers: ${properties.app.workers} workers need database.url (DB_URL): the embedded database serves one process only`,
    );
  }
  if (properties.database.listen_url && !properties.database.url) {
    throw new ConfigError('database.listen_url (DB_LISTEN_URL) needs database.url (DB_URL): the embedded database has no separate connection to listen on');
  }
  const tracing = properties.tracing;
  if (tracing.protocol === 'grpc' && tracesUrlOf(tracing) !== undefined) {
    throw new ConfigError(
      'tracing.protocol (OTEL_EXPORTER_OTLP_PROTOCOL): grpc is not supported (no gRPC exporter is installed); use http/protobuf or http/json, and the collector\'s OTLP/HTTP port (4318)',
    );
  }
  return { ...properties, mcp_servers: servers.data, budgets: budgets.config, config_file: configFile };
}

/** OpenTelemetry's variables for traces alone, which win over the general ones. */
const OTLP_TRACES_ALIASES = ['PROTOCOL', 'HEADERS', 'TIMEOUT'] as const;

/**
 * Environment names the schema does not map one-to-one: PORT stands in for APP_PORT;
 * `OTEL_EXPORTER_OTLP_TRACES_<X>` for `OTEL_EXPORTER_OTLP_<X>`.
 */
function withAliases(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const environment = { ...env };
  if (!environment.APP_PORT && environment.PORT) environment.APP_PORT = environment.PORT;
  for (const name of OTLP_TRACES_ALIASES) {
    const traces = environment[`OTEL_EXPORTER_OTLP_TRACES_${name}`];
    if (traces) environment[`OTEL_EXPORTER_OTLP_${name}`] = traces;
  }
  return environment;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const line = message.split('\n').find((part) => part.trim() !== '') ?? message;
  return line.replace(/^Error: /, '').trim();
}
