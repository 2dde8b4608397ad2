import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../config/load-config.js';

function deploymentFile(yaml: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'svc-config-')), 'deployment.yaml');
  writeFileSync(path, yaml);
  return path;
}

function loadError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('gives the specification defaults when nothing is set', () => {
    const config = loadConfig({});
    expect(config.app).to.include({ host: '0.0.0.0', port: 1111, reload: false });
    expect(config.llm).to.include({ base_url: 'http://localhost:30000/v1', temperature: 0.7, max_tokens: 1024 });
    expect(config.database.url).to.equal('');
    expect(config.memory.use_long_term).to.equal(false);
    expect(config.state.graph_path).to.equal('config/default-graph.yaml');
    expect(config.mcp_servers).to.deep.equal({});
  });

  it('reads the deployment file named by CONFIG_FILE', () => {
    const file = deploymentFile(`
app:
  port: 2345
  system_prompt: Be brief.
llm:
  base_url: http://127.0.0.1:9999/v1
mcp_servers:
  everything:
    transport: stdio
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything"]
`);
    const config = loadConfig({ CONFIG_FILE: file });
    expect(config.app.port).to.equal(2345);
    expect(config.app.system_prompt).to.equal('Be brief.');
    expect(config.llm.base_url).to.equal('http://127.0.0.1:9999/v1');
    expect(config.mcp_servers.everything).to.deep.include({ transport: 'stdio', command: 'npx', per_user: false });
    expect(config.config_file).to.equal(file);
  });

  it('lets the environment override the deployment file', () => {
    const file = deploymentFile('app:\n  port: 2345\n');
    const config = loadConfig({
      CONFIG_FILE: file,
      APP_PORT: '3456',
      APP_HOST: '127.0.0.1',
      LLM_BASE_URL: 'http://10.0.0.5:8000/v1',
      LLM_MODEL: 'qwen',
      LLM_API_KEY: 'secret',
      DB_URL: 'postgres://u:p@db:5432/agents',
      DATA_DIR: '/var/lib/svc',
      STATE_GRAPH_PATH: '/etc/svc/graph.yaml',
      SYSTEM_PROMPT: 'Hi.',
      LOG_LEVEL: 'debug',
    });
    expect(config.app).to.include({ port: 3456, host: '127.0.0.1', system_prompt: 'Hi.' });
    expect(config.llm).to.include({ base_url: 'http://10.0.0.5:8000/v1', model: 'qwen', api_key: 'secret' });
    expect(config.database).to.include({ url: 'postgres://u:p@db:5432/agents', data_dir: '/var/lib/svc' });
    expect(config.state.graph_path).to.equal('/etc/svc/graph.yaml');
    expect(config.log.level).to.equal('debug');
  });

  it('keeps idle connections 65 s and waits 66 s for headers unless told otherwise, longer than a proxy\'s 60 s', () => {
    expect(loadConfig({}).app).to.include({ keep_alive_timeout_ms: 65_000, headers_timeout_ms: 66_000 });
    expect(loadConfig({ APP_KEEP_ALIVE_TIMEOUT_MS: '90000', APP_HEADERS_TIMEOUT_MS: '91000' }).app).to.include({ keep_alive_timeout_ms: 90_000, headers_timeout_ms: 91_000 });
    expect(loadError({ APP_KEEP_ALIVE_TIMEOUT_MS: '0' }).message).to.match(/^app\.keep_alive_timeout_ms: /);
  });

  it('reads the metrics token from METRICS_TOKEN, empty by default', () => {
    expect(loadConfig({}).metrics.token).to.equal('');
    expect(loadConfig({ METRICS_TOKEN: 'prometheus-token' }).metrics.token).to.equal('prometheus-token');
  });

  it('takes PORT when APP_PORT is not set, and APP_PORT over PORT', () => {
    expect(loadConfig({ PORT: '4000' }).app.port).to.equal(4000);
    expect(loadConfig({ PORT: '4000', APP_PORT: '5000' }).app.port).to.equal(5000);
  });

  it('names the key when a value is bad', () => {
    expect(loadError({ APP_PORT: 'abc' }).message).to.match(/^app\.port: /);
    expect(loadError({ LLM_TEMPERATURE: '3' }).message).to.match(/^llm\.temperature: /);
    expect(loadError({ LLM_BASE_URL: 'not a url' }).message).to.match(/^llm\.base_url: /);
    expect(loadError({ LLM_MAX_TOKENS: '0' }).message).to.match(/^llm\.max_tokens: /);
    expect(loadError({ LOG_LEVEL: 'loud' }).message).to.match(/^log\.level: /);
    expect(loadError({ MEMORY_HNSW_EF_SEARCH: '0' }).message).to.match(/^memory\.hnsw_ef_search: must be an integer from 1 to 1000/);
    expect(loadError({ MEMORY_HNSW_EF_SEARCH: '1001' }).message).to.match(/^memory\.hnsw_ef_search: /);
    expect(loadConfig({ MEMORY_HNSW_EF_SEARCH: '200' }).memory.hnsw_ef_search).to.equal(200);
    expect(loadError({ INSPECT_TRACE_URL: 'http://localhost:16686/trace/' }).message).to.match(/^inspect\.trace_url: must be empty or an http\(s\) URL with \{trace_id\}/);
    expect(loadError({ INSPECT_TRACE_URL: 'jaeger/{trace_id}' }).message).to.match(/^inspect\.trace_url: /);
    expect(loadConfig({ INSPECT_TRACE_URL: 'http://localhost:16686/trace/{trace_id}' }).inspect.trace_url).to.equal('http://localhost:16686/trace/{trace_id}');
  });

  it('refuses a database URL that is not PostgreSQL without printing it', () => {
    const error = loadError({ DB_URL: 'mysql://root:hunter2@db/x' });
    expect(error.message).to.match(/^database\.url: /);
    expect(error.message).not.to.include('hunter2');
  });

  it('reads the LISTEN connection string from DB_LISTEN_URL, empty by default, and refuses it without database.url or when not PostgreSQL', () => {
    expect(loadConfig({}).database.listen_url).to.equal('');
    const direct = 'postgres://u:p@db-primary:5432/agents';
    expect(loadConfig({ DB_URL: 'postgres://u:p@pgbouncer:6432/agents', DB_LISTEN_URL: direct }).database.listen_url).to.equal(direct);
    expect(loadError({ DB_LISTEN_URL: direct }).message).to.match(/^database\.listen_url \(DB_LISTEN_URL\) needs database\.url/);
    const notPostgres = loadError({ DB_URL: direct, DB_LISTEN_URL: 'mysql://root:hunter2@db/x' });
    expect(notPostgres.message).to.match(/^database\.listen_url: /);
    expect(notPostgres.message).not.to.include('hunter2');
  });

  it('refuses an unknown key and a bad tool server in the deployment file', () => {
    expect(loadError({ CONFIG_FILE: deploymentFile('app:\n  colour: blue\n') }).message).to.include('app.colour');
    const badServer = deploymentFile('mcp_servers:\n  broken:\n    transport: carrier-pigeon\n');
    expect(loadError({ CONFIG_FILE: badServer }).message).to.match(/^mcp_servers\.broken/);
  });

  it('reads require_approval as never by default, always, or a list of tool names', () => {
    const file = deploymentFile(`
mcp_servers:
  quiet:
    transport: stdio
    command: quiet-server
  careful:
    transport: stdio
    command: careful-server
    require_approval: always
  picky:
    transport: http
    url: http://127.0.0.1:3001/mcp
    require_approval: [get-sum, echo]
`);
    const servers = loadConfig({ CONFIG_FILE: file }).mcp_servers;
    expect(servers.quiet!.require_approval).to.equal('never');
    expect(servers.careful!.require_approval).to.equal('always');
    expect(servers.picky!.require_approval).to.deep.equal(['get-sum', 'echo']);
  });

  it('refuses a require_approval that is not never, always or a list of tool names, naming it', () => {
    const server = (rule: string) => deploymentFile(`mcp_servers:\n  tools:\n    transport: stdio\n    command: server\n    require_approval: ${rule}\n`);
    expect(loadError({ CONFIG_FILE: server('sometimes') }).message).to.match(/^mcp_servers\.tools\.require_approval: must be never, always, or a list/);
    expect(loadError({ CONFIG_FILE: server('true') }).message).to.match(/^mcp_servers\.tools\.require_approval: /);
    expect(loadError({ CONFIG_FILE: server('[get-sum, ""]') }).message).to.match(/^mcp_servers\.tools\.require_approval\.1: a tool name must not be empty/);
  });

  it('reads the approval and denial words from a list in the file or comma-separated from the environment', () => {
    expect(loadConfig({}).tools).to.deep.include({ approval_words: ['yes', 'y', 'approve', 'approved', 'ok'], denial_words: ['no', 'n', 'deny', 'denied'] });
    const file = deploymentFile('tools:\n  approval_words: [ja, oui]\n');
    expect(loadConfig({ CONFIG_FILE: file }).tools.approval_words).to.deep.equal(['ja', 'oui']);
    expect(loadConfig({ CONFIG_FILE: file, TOOLS_DENIAL_WORDS: 'nein,non' }).tools.denial_words).to.deep.equal(['nein', 'non']);
  });

  it('refuses an empty approval word list, a word of punctuation only, and a word that both approves and refuses', () => {
    expect(loadError({ TOOLS_APPROVAL_WORDS: '' }).message).to.match(/^tools\.approval_words: /);
    expect(loadError({ TOOLS_DENIAL_WORDS: 'no,?!' }).message).to.match(/^tools\.denial_words: /);
    expect(loadError({ TOOLS_DENIAL_WORDS: 'no,OK.' }).message).to.equal('tools.denial_words: "OK." is also in tools.approval_words: a word cannot both approve and refuse');
  });

  it('has no budget unless one is set, and reads budgets.default and budgets.users from the file, the default ones from the environment over it', () => {
    expect(loadConfig({}).budgets).to.deep.equal({ default: { tokens_per_day: 0, tokens_per_month: 0, tokens_per_turn: 0 }, users: {} });
    const file = deploymentFile(`
budgets:
  default:
    tokens_per_day: 200000
    tokens_per_turn: 20000
  users:
    alice:
      tokens_per_day: 1000000
    bob: {}
`);
    expect(loadConfig({ CONFIG_FILE: file }).budgets).to.deep.equal({
      default: { tokens_per_day: 200000, tokens_per_month: 0, tokens_per_turn: 20000 },
      users: { alice: { tokens_per_day: 1000000 }, bob: {} },
    });
    const fromEnv = loadConfig({ CONFIG_FILE: file, BUDGETS_TOKENS_PER_DAY: '500', BUDGETS_TOKENS_PER_MONTH: '9000', BUDGETS_TOKENS_PER_TURN: '' });
    expect(fromEnv.budgets.default).to.deep.equal({ tokens_per_day: 500, tokens_per_month: 9000, tokens_per_turn: 20000 });
  });

  it('refuses a budget that is not a whole number of tokens, and an unknown budget, naming the key or the variable', () => {
    const budget = (yaml: string) => loadError({ CONFIG_FILE: deploymentFile(yaml) }).message;
    expect(budget('budgets:\n  users:\n    alice:\n      tokens_per_day: -5\n')).to.equal('budgets.users.alice.tokens_per_day: must be 0 (no limit) or more');
    expect(budget('budgets:\n  default:\n    tokens_per_day: 1.5\n')).to.match(/^budgets\.default\.tokens_per_day: must be a whole number of tokens/);
    expect(budget('budgets:\n  default:\n    tokens_per_week: 10\n')).to.match(/^budgets\.default: .*tokens_per_week/);
    expect(budget('budgets:\n  limits: {}\n')).to.match(/^budgets: .*limits/);
    expect(loadError({ BUDGETS_TOKENS_PER_DAY: 'lots' }).message).to.equal('budgets.default.tokens_per_day (BUDGETS_TOKENS_PER_DAY): must be a whole number of tokens (0: no limit), not "lots"');
  });

  it('says so when CONFIG_FILE names a missing file', () => {
    expect(loadError({ CONFIG_FILE: '/nonexistent/deployment.yaml' }).message).to.match(/^CONFIG_FILE: /);
  });
});
