import convict from 'convict';
import { normaliseWord } from '../runtime/tools/approval-words.js';

/** True for a string that is an absolute http(s) URL with a host. */
function isHttpUrl(value: unknown): boolean {
  return typeof value === 'string' && /^https?:\/\/[^\s/]+/.test(value) && URL.canParse(value);
}

/** Registers the formats the schema uses that convict does not ship. */
export function registerFormats(): void {
  convict.addFormat({
    name: 'http-url',
    validate(value: unknown) {
      if (!isHttpUrl(value)) throw new Error('must be an http(s) URL');
    },
  });
  convict.addFormat({
    name: 'optional-http-url',
    validate(value: unknown) {
      if (value === '') return;
      if (!isHttpUrl(value)) throw new Error('must be empty or an http(s) URL');
    },
  });
  convict.addFormat({
    name: 'trace-url',
    validate(value: unknown) {
      if (value === '') return;
      if (typeof value !== 'string' || !value.includes('{trace_id}') || !isHttpUrl(value.replace('{trace_id}', '0'))) {
        throw new Error('must be empty or an http(s) URL with {trace_id} where the trace id goes');
      }
    },
  });
  convict.addFormat({
    name: 'ratio',
    coerce: (value: unknown) => (typeof value === 'string' ? Number(value) : value),
    validate(value: unknown) {
      if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw new Error('must be a number from 0 to 1');
    },
  });
  convict.addFormat({
    name: 'database-url',
    validate(value: unknown) {
      if (value === '') return;
      if (typeof value !== 'string' || !URL.canParse(value) || !/^postgres(ql)?:$/.test(new URL(value).protocol)) {
        throw new Error('must be empty (embedded database) or postgres://<user>:<password>@<host>:<port>/<database>');
      }
    },
  });
  convict.addFormat({
    name: 'positive-int',
    coerce: (value: unknown) => (typeof value === 'string' ? Number(value) : value),
    validate(value: unknown) {
      if (!Number.isInteger(value) || (value as number) <= 0) throw new Error('must be a positive integer');
    },
  });
  convict.addFormat({
    name: 'ef-search',
    coerce: (value: unknown) => (typeof value === 'string' ? Number(value) : value),
    validate(value: unknown) {
      // pgvector's bounds for hnsw.ef_search.
      if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 1000) throw new Error('must be an integer from 1 to 1000');
    },
  });
  convict.addFormat({
    name: 'shared-buffers-mb',
    coerce: (value: unknown) => (typeof value === 'string' ? Number(value) : value),
    validate(value: unknown) {
      // The embedded database's WebAssembly memory is at most 2 GB: half of it at most for the buffers.
      if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 1024) throw new Error('must be an integer from 1 to 1024');
    },
  });
  convict.addFormat({
    name: 'word-list',
    // The environment gives a comma-separated list; the deployment file a YAML list or the same text.
    coerce: (value: unknown) => (typeof value === 'string' ? value.split(',') : value),
    validate(value: unknown) {
      if (!Array.isArray(value) || value.length === 0) throw new Error('must be a non-empty list of words');
      if (value.some((word) => typeof word !== 'string' || normaliseWord(word) === '')) {
        throw new Error('every entry must be a word (not empty, not only punctuation)');
      }
    },
  });
  convict.addFormat({
    name: 'temperature',
    coerce: (value: unknown) => (typeof value === 'string' ? Number(value) : value),
    validate(value: unknown) {
      if (typeof value !== 'number' || !(value >= 0 && value <= 2)) throw new Error('must be a number from 0 to 2');
    },
  });
}

/** The values the schema describes (checked against the schema by the compiler). */
export type ConfigValues = {
  app: {
    host: string;
    port: number;
    reload: boolean;
    system_prompt: string;
    body_limit: string;
    max_messages: number;
    public_url: string;
    workers: number;
    shutdown_timeout_ms: number;
    keep_alive_timeout_ms: number;
    headers_timeout_ms: number;
  };
  llm: {
    base_url: string;
    model: string;
    api_key: string;
    temperature: number;
    max_tokens: number;
    max_tokens_limit: number;
    timeout_ms: number;
    health_timeout_ms: number;
    embedding_model: string;
    failure_mode: 'reply' | 'http';
    context_window: number;
    tool_call_parser: 'auto' | 'none' | 'hermes' | 'llama3_json' | 'mistral';
    alternate_roles: 'auto' | 'always' | 'never';
    max_retries: number;
    max_connections: number;
  };
  database: { url: string; listen_url: string; data_dir: string; pool_size: number; embedded_shared_buffers_mb: number };
  memory: {
    user_id: string;
    use_long_term: boolean;
    short_term_turns: number;
    long_term_results: number;
    embeddings: string;
    embeddings_timeout_ms: number;
    embedding_dimensions: number;
    hnsw_ef_search: number;
  };
  state: { graph_path: string; max_tool_rounds: number; max_handoffs: number };
  sessions: { cache_size: number; idle_ms: number; turn_wait_ms: number; write_wait_ms: number; lease_ms: number; idempotency_ttl_s: number; max_turn_attempts: number; abandoned_after_ms: number };
  limits: { requests_per_minute: number; burst: number; concurrent_requests: number };
  budgets: unknown;
  metrics: { enabled: boolean; token: string };
  inspect: { page: boolean; websocket_url: string; trace_url: string; recent_sessions: number; recent_calls_per_session: number; recent_calls: number; store_calls: boolean };
  log: { level: string; format: 'text' | 'json' };
  tools: {
    connect_timeout_ms: number;
    call_timeout_ms: number;
    user_process_idle_ms: number;
    heartbeat_ms: number;
    approval_words: string[];
    denial_words: string[];
  };
  oauth: {
    issuer_url: string;
    client_id: string;
    client_secret: string;
    scopes: string;
    redirect_url: string;
    token_key: string;
    state_ttl_ms: number;
    login_link_ttl_ms: number;
    refresh_margin_ms: number;
    allow_insecure: boolean;
  };
  auth: { api_keys: string };
  agents: { export_dir: string };
  responses: { event_retention_ms: number };
  mcp_servers: Record<string, unknown>;
  webhooks: {
    allow_http: boolean;
    allow_private_targets: boolean;
    max_attempts: number;
    initial_backoff_ms: number;
    max_backoff_ms: number;
    timeout_ms: number;
    poll_ms: number;
  };
  tracing: {
    endpoint: string;
    traces_endpoint: string;
    protocol: 'http/protobuf' | 'http/json' | 'grpc';
    headers: string;
    timeout_ms: number;
    exporter: 'otlp' | 'none';
    sdk_disabled: boolean;
    service_name: string;
    sampler: 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
    sampler_arg: number;
    bsp_schedule_delay_ms: number;
    bsp_export_timeout_ms: number;
    bsp_max_queue_size: number;
    bsp_max_export_batch_size: number;
    capture_message_content: boolean;
  };
};

/** The convict schema: every setting, its default and its environment variable. */
export const configSchema: convict.Schema<ConfigValues> = {
  app: {
    host: { doc: 'Address the service listens on.', format: String, default: '0.0.0.0', env: 'APP_HOST' },
    port: { doc: 'Port the service listens on (PORT is read too).', format: 'port', default: 1111, env: 'APP_PORT' },
    reload: { doc: 'Restart when source files change (development).', format: Boolean, default: false, env: 'APP_RELOAD' },
    system_prompt: {
      doc: 'Base system prompt, inserted as the first message of every context.',
      format: String,
      default: 'You are a helpful assistant.',
      env: 'SYSTEM_PROMPT',
    },
    body_limit: { doc: 'Largest accepted request body.', format: String, default: '1mb', env: 'APP_BODY_LIMIT' },
    max_messages: { doc: 'Most messages accepted in one chat request.', format: 'positive-int', default: 1000, env: 'APP_MAX_MESSAGES' },
    public_url: {
      doc: 'The address users reach the service at; login URLs in tool_auth_required errors start with it.',
      format: 'http-url',
      default: 'http://localhost:1111',
      env: 'APP_PUBLIC_URL',
    },
    workers: {
      doc: 'Worker processes sharing the port (more than 1 needs database.url: the embedded database is single-process).',
      format: 'positive-int',
      default: 1,
      env: 'APP_WORKERS',
    },
    shutdown_timeout_ms: {
      doc: 'On SIGTERM or SIGINT, how long turns and streams in flight may take to finish before they are cancelled, in ms.',
      format: 'positive-int',
      default: 30_000,
      env: 'APP_SHUTDOWN_TIMEOUT_MS',
    },
    keep_alive_timeout_ms: {
      doc: "How long an idle kept-alive client connection stays open, in ms. Keep it longer than any proxy or load balancer in front keeps its idle connections to the service (nginx upstream keepalive_timeout 60 s, AWS ALB 60 s), or a request sent as the service closes the connection fails; Node's own default is 5 s.",
      format: 'positive-int',
      default: 65_000,
      env: 'APP_KEEP_ALIVE_TIMEOUT_MS',
    },
    headers_timeout_ms: {
      doc: "How long a request's headers may take to arrive, in ms; must exceed app.keep_alive_timeout_ms.",
      format: 'positive-int',
      default: 66_000,
      env: 'APP_HEADERS_TIMEOUT_MS',
    },
  },
  llm: {
    base_url: { doc: 'OpenAI-compatible LLM server, with its /v1.', format: 'http-url', default: 'http://localhost:30000/v1', env: 'LLM_BASE_URL' },
    model: { doc: 'Model name sent to the LLM server.', format: String, default: 'default', env: 'LLM_MODEL' },
    api_key: { doc: 'API key for the LLM server (a placeholder for local servers).', format: String, default: 'EMPTY', env: 'LLM_API_KEY', sensitive: true },
    temperature: { doc: 'Default sampling temperature (0 to 2).', format: 'temperature', default: 0.7, env: 'LLM_TEMPERATURE' },
    max_tokens: { doc: 'Default most tokens per reply.', format: 'positive-int', default: 1024, env: 'LLM_MAX_TOKENS' },
    max_tokens_limit: {
      doc: "The most tokens a reply may ask for (a request's max_tokens, max_completion_tokens or max_output_tokens above it is lowered to it); the model's context window bounds it too: a call asks at most for what the window leaves after the prompt.",
      format: 'positive-int',
      default: 32_768,
      env: 'LLM_MAX_TOKENS_LIMIT',
    },
    timeout_ms: { doc: 'Time-out of one LLM request, in ms.', format: 'positive-int', default: 120_000, env: 'LLM_TIMEOUT_MS' },
    health_timeout_ms: { doc: 'Time-out of the health check towards the LLM server, in ms.', format: 'positive-int', default: 2000, env: 'LLM_HEALTH_TIMEOUT_MS' },
    embedding_model: { doc: 'Embedding model for long-term memory.', format: String, default: 'default', env: 'LLM_EMBEDDING_MODEL' },
    failure_mode: {
      doc: "How a failed LLM call is answered: reply (the specification's: the error text is the assistant's reply, 200) or http (a 502 in the OpenAI error shape, or an error event mid-stream, that a client can retry; nothing of the failed turn but the user's message is stored).",
      format: ['reply', 'http'],
      default: 'reply',
      env: 'LLM_FAILURE_MODE',
    },
    context_window: {
      doc: "The model's context window in tokens; 0 learns it from the server (max_model_len in vLLM's and SGLang's /v1/models, n_ctx in llama.cpp's /props, context_length in Ollama's /api/ps). Every LLM call is fitted into it: the system prompt, the tools, the new message and max_tokens always, then the most recent history that fits; a request whose least does not fit is answered 400 context_length_exceeded.",
      format: 'nat',
      default: 0,
      env: 'LLM_CONTEXT_WINDOW',
    },
    tool_call_parser: {
      doc: 'Tool calls the LLM server left as text in a reply (no tool-call parser, or one that missed) are read out of it: auto (Hermes/Qwen <tool_call>, Llama 3 JSON and Mistral [TOOL_CALLS]), none, or one of hermes, llama3_json, mistral. Only when tools were offered.',
      format: ['auto', 'none', 'hermes', 'llama3_json', 'mistral'],
      default: 'auto',
      env: 'LLM_TOOL_CALL_PARSER',
    },
    alternate_roles: {
      doc: "Whether the model's chat template requires roles to alternate user/assistant after one system message (Mistral, Gemma and others): auto learns it from the template's error once, always shapes every call so, never leaves calls as they are.",
      format: ['auto', 'always', 'never'],
      default: 'auto',
      env: 'LLM_ALTERNATE_ROLES',
    },
    max_retries: {
      doc: 'How many more times an LLM call is sent when the server answered 429 or 503 with a Retry-After of at most 10 s, or the request never reached it (a kept-alive connection it had just closed); 0 sends each call once.',
      format: 'nat',
      default: 2,
      env: 'LLM_MAX_RETRIES',
    },
    max_connections: { doc: 'Connections kept to the LLM server at most, per worker.', format: 'positive-int', default: 256, env: 'LLM_MAX_CONNECTIONS' },
  },
  database: {
    url: {
      doc: 'PostgreSQL connection string; empty runs the embedded database in data_dir.',
      format: 'database-url',
      default: '',
      env: 'DB_URL',
      sensitive: true,
    },
    listen_url: {
      doc: "PostgreSQL connection string of the connections that wait for notifications (LISTEN: a session handed over between workers and instances, MCP follow-ups), straight to the server, when database.url goes through a transaction pooler such as PgBouncer, where LISTEN is lost; the same database as database.url. Empty: they use database.url.",
      format: 'database-url',
      default: '',
      env: 'DB_LISTEN_URL',
      sensitive: true,
    },
    data_dir: { doc: 'Folder of the embedded database.', format: String, default: './data', env: 'DATA_DIR' },
    pool_size: { doc: 'Connections in the PostgreSQL pool.', format: 'positive-int', default: 10, env: 'DB_POOL_SIZE' },
    embedded_shared_buffers_mb: {
      doc: "The embedded database's shared buffers (PostgreSQL's shared_buffers), in MB, 1 to 1024: resident from the start, so they set most of its memory at rest. Pages beyond them are read from the data folder, through the operating system's cache.",
      format: 'shared-buffers-mb',
      default: 16,
      env: 'DB_EMBEDDED_SHARED_BUFFERS_MB',
    },
  },
  memory: {
    user_id: { doc: 'User id when a request names none.', format: String, default: 'default_user', env: 'MEMORY_USER_ID' },
    use_long_term: { doc: 'Long-term vector memory (pgvector).', format: Boolean, default: false, env: 'MEMORY_USE_LONG_TERM' },
    short_term_turns: { doc: 'Stored turns placed in the context when a client sends only its new message.', format: 'positive-int', default: 20, env: 'MEMORY_SHORT_TERM_TURNS' },
    long_term_results: { doc: 'Long-term memories recalled into a context.', format: 'positive-int', default: 5, env: 'MEMORY_LONG_TERM_RESULTS' },
    embeddings: {
      doc: 'Where long-term memory embeddings come from: llm (the LLM server /v1/embeddings), local (hashed words, offline), or auto (the LLM server when it offers embeddings at start-up, else local).',
      format: ['auto', 'llm', 'local'],
      default: 'auto',
      env: 'MEMORY_EMBEDDINGS',
    },
    embeddings_timeout_ms: {
      doc: "Time-out of one call to the LLM server's /v1/embeddings (recalling memories waits for it on every turn), in ms.",
      format: 'positive-int',
      default: 5000,
      env: 'MEMORY_EMBEDDINGS_TIMEOUT_MS',
    },
    embedding_dimensions: { doc: 'Dimensions of stored embeddings.', format: 'positive-int', default: 256, env: 'MEMORY_EMBEDDING_DIMENSIONS' },
    hnsw_ef_search: {
      doc: "Candidates a recall's HNSW index search keeps (pgvector's hnsw.ef_search, 1 to 1000, set for each search alone): higher finds more of the exact nearest memories and takes longer. Users with at most 1,000 memories are searched exactly whatever it is.",
      format: 'ef-search',
      default: 200,
      env: 'MEMORY_HNSW_EF_SEARCH',
    },
  },
  state: {
    graph_path: { doc: 'State graph file (YAML or JSON).', format: String, default: 'config/default-graph.yaml', env: 'STATE_GRAPH_PATH' },
    max_tool_rounds: { doc: 'Most tool rounds in one turn.', format: 'positive-int', default: 5, env: 'STATE_MAX_TOOL_ROUNDS' },
    max_handoffs: {
      doc: 'Most hand-offs (transfer_to_<state> calls the model makes) in one turn; past it the transfer tools are not offered and the state answers itself.',
      format: 'positive-int',
      default: 5,
      env: 'STATE_MAX_HANDOFFS',
    },
  },
  sessions: {
    cache_size: { doc: 'Most session actors kept in memory.', format: 'positive-int', default: 10_000, env: 'SESSIONS_CACHE_SIZE' },
    idle_ms: { doc: 'A session actor idle this long is evicted from memory, in ms.', format: 'positive-int', default: 600_000, env: 'SESSIONS_IDLE_MS' },
    turn_wait_ms: { doc: 'How long a request waits for a busy session, in ms.', format: 'positive-int', default: 120_000, env: 'SESSIONS_TURN_WAIT_MS' },
    write_wait_ms: {
      doc: "How long a turn waits for a failing database write: the user's message must commit within it (else 503); the end of a turn answers anyway after it (the write keeps retrying), in ms.",
      format: 'positive-int',
      default: 5000,
      env: 'SESSIONS_WRITE_WAIT_MS',
    },
    lease_ms: {
      doc: 'On PostgreSQL, a session lease (one turn at a time across workers and instances) not renewed this long is free again; on either database, a background response whose process stopped renewing it this long is taken over by another process (or by the next start), in ms.',
      format: 'positive-int',
      default: 15_000,
      env: 'SESSIONS_LEASE_MS',
    },
    idempotency_ttl_s: {
      doc: "How long a request's Idempotency-Key is kept with its answer (a request with the same key and user gets that answer instead of a second turn), in seconds.",
      format: 'positive-int',
      default: 86_400,
      env: 'SESSIONS_IDEMPOTENCY_TTL_S',
    },
    abandoned_after_ms: {
      doc: "How long a foreground turn that stored a step (it made tool calls) and whose process stopped must be quiet before the service finishes it on its own: past its session lease's lapse on PostgreSQL, since its last step on the embedded database, in ms. Long after a client's own retries of it, which finish it first (a retry that came after would be a turn of its own).",
      format: 'positive-int',
      default: 60_000,
      env: 'SESSIONS_ABANDONED_AFTER_MS',
    },
    max_turn_attempts: {
      doc: 'How many times a background response, or a foreground turn nobody sent again, whose process stopped is taken over and continued from its last stored step before it is failed with the reason.',
      format: 'positive-int',
      default: 3,
      env: 'SESSIONS_MAX_TURN_ATTEMPTS',
    },
  },
  limits: {
    requests_per_minute: {
      doc: 'Chat requests a user may start per minute, per instance (0: no limit); past it the answer is 429 with Retry-After.',
      format: 'nat',
      default: 600,
      env: 'LIMITS_REQUESTS_PER_MINUTE',
    },
    burst: { doc: 'Chat requests a user may start at once above the per-minute rate.', format: 'nat', default: 60, env: 'LIMITS_BURST' },
    concurrent_requests: {
      doc: 'Chat requests of one user in flight at once, per instance (0: no limit); past it the answer is 429.',
      format: 'nat',
      default: 16,
      env: 'LIMITS_CONCURRENT_REQUESTS',
    },
  },
  budgets: {
    doc: 'Token budgets: budgets.default and budgets.users.<user_id>, each with tokens_per_day, tokens_per_month and tokens_per_turn (0 or not set: no limit); a user\'s entry replaces the default\'s keys it sets.',
    // `Object` keeps convict from reading `default` and the user ids as schema keys; load-config validates the entries.
    format: Object,
    default: {},
  },
  metrics: {
    enabled: {
      doc: 'Serve Prometheus metrics at /metrics (with API keys set, for the metrics token or an admin key; without, for clients on this machine only).',
      format: Boolean,
      default: true,
      env: 'METRICS_ENABLED',
    },
    token: {
      doc: 'With API keys set, a bearer token for Prometheus that opens /metrics and nothing else (an admin key, bound to no user, opens it too; a key bound to a user does not). Without API keys it is not read.',
      format: String,
      default: '',
      env: 'METRICS_TOKEN',
      sensitive: true,
    },
  },
  inspect: {
    page: { doc: 'Serve the session inspector page at /inspect (behind the API key when keys are set).', format: Boolean, default: true, env: 'INSPECT_PAGE' },
    websocket_url: {
      doc: 'Send every session actor\'s events to an XState inspector at this WebSocket URL (e.g. ws://localhost:8080); empty: off.',
      format: String,
      default: '',
      env: 'INSPECT_WEBSOCKET_URL',
    },
    trace_url: {
      doc: 'The address of one trace in your tracing UI, `{trace_id}` where its id goes (Jaeger: http://localhost:16686/trace/{trace_id}; Tempo in Grafana: its Explore link): the inspector links each recorded call to its trace there. Empty: the trace id is shown as text.',
      format: 'trace-url',
      default: '',
      env: 'INSPECT_TRACE_URL',
    },
    recent_sessions: { doc: 'Sessions the inspector page lists.', format: 'positive-int', default: 50, env: 'INSPECT_RECENT_SESSIONS' },
    recent_calls_per_session: {
      doc: 'LLM and tool calls kept in memory per session for /v1/agents/{id}/calls and the inspector (the oldest go first).',
      format: 'positive-int',
      default: 50,
      env: 'INSPECT_RECENT_CALLS_PER_SESSION',
    },
    recent_calls: {
      doc: 'LLM and tool calls kept in memory in all, over every session of the process (the oldest go first).',
      format: 'positive-int',
      default: 2_000,
      env: 'INSPECT_RECENT_CALLS',
    },
    store_calls: {
      doc: 'Also store every LLM and tool call in the database (each LLM call with its whole context, so it can be large); off: only the recent calls in memory.',
      format: Boolean,
      default: false,
      env: 'INSPECT_STORE_CALLS',
    },
  },
  log: {
    level: { doc: 'Log level.', format: ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'], default: 'info', env: 'LOG_LEVEL' },
    format: {
      doc: 'How each line is written: `text` (time, level, message, then the ids and details as JSON) or `json` (one JSON object a line, for Loki, Elasticsearch or CloudWatch).',
      format: ['text', 'json'],
      default: 'text',
      env: 'LOG_FORMAT',
    },
  },
  tools: {
    connect_timeout_ms: { doc: 'Time-out of connecting to a tool server and listing its tools, in ms.', format: 'positive-int', default: 20_000, env: 'TOOLS_CONNECT_TIMEOUT_MS' },
    call_timeout_ms: { doc: 'Time-out of one tool call, in ms (a server may set its own timeout_ms).', format: 'positive-int', default: 60_000, env: 'TOOLS_CALL_TIMEOUT_MS' },
    user_process_idle_ms: { doc: 'A per-user tool server process idle this long is stopped, in ms.', format: 'positive-int', default: 300_000, env: 'TOOLS_USER_PROCESS_IDLE_MS' },
    heartbeat_ms: { doc: 'Interval of SSE comment lines while tools run, in ms.', format: 'positive-int', default: 10_000, env: 'TOOLS_HEARTBEAT_MS' },
    approval_words: {
      doc: 'A user message that is just one of these words (case-insensitive, trailing punctuation ignored) approves the tool calls a reply asked about (mcp_servers.<name>.require_approval); the first is named in the question.',
      format: 'word-list',
      default: ['yes', 'y', 'approve', 'approved', 'ok'],
      env: 'TOOLS_APPROVAL_WORDS',
    },
    denial_words: {
      doc: "A user message that is just one of these words refuses the tool calls a reply asked about, and nothing more; any other message refuses them too and goes on as the user's next message. The first is named in the question.",
      format: 'word-list',
      default: ['no', 'n', 'deny', 'denied'],
      env: 'TOOLS_DENIAL_WORDS',
    },
  },
  oauth: {
    issuer_url: { doc: 'OpenID Connect issuer of the identity provider (e.g. https://accounts.google.com); empty disables /auth/idp.', format: String, default: '', env: 'OAUTH_ISSUER_URL' },
    client_id: { doc: 'OAuth client id.', format: String, default: '', env: 'OAUTH_CLIENT_ID' },
    client_secret: { doc: 'OAuth client secret.', format: String, default: '', env: 'OAUTH_CLIENT_SECRET', sensitive: true },
    scopes: { doc: 'Scopes asked for, space-separated.', format: String, default: 'openid email profile', env: 'OAUTH_SCOPES' },
    redirect_url: { doc: 'The callback URL registered with the provider.', format: 'http-url', default: 'http://localhost:1111/auth/idp/callback', env: 'OAUTH_REDIRECT_URL' },
    token_key: {
      doc: 'Key encrypting stored tokens (AES-256-GCM): 32 bytes, base64 or hex. Required when an issuer is set.',
      format: String,
      default: '',
      env: 'OAUTH_TOKEN_KEY',
      sensitive: true,
    },
    state_ttl_ms: { doc: 'How long a login may take, in ms.', format: 'positive-int', default: 600_000, env: 'OAUTH_STATE_TTL_MS' },
    login_link_ttl_ms: {
      doc: 'How long the signed login link in a tool_auth_required error starts a login, in ms. With API keys set, /auth/idp/login needs such a link or the user\'s key.',
      format: 'positive-int',
      default: 600_000,
      env: 'OAUTH_LOGIN_LINK_TTL_MS',
    },
    refresh_margin_ms: { doc: 'Tokens are refreshed this long before they expire, in ms.', format: 'positive-int', default: 60_000, env: 'OAUTH_REFRESH_MARGIN_MS' },
    allow_insecure: { doc: 'Allow an http:// issuer (development and tests only).', format: Boolean, default: false, env: 'OAUTH_ALLOW_INSECURE' },
  },
  auth: {
    api_keys: {
      doc: "API keys, comma-separated; an entry KEY:user_id binds the key to that user, and a key bound to no user is an admin key (acts as any user, reads /metrics and every user's usage). Empty: local mode (chat, /health and /auth/idp need no key; the agent endpoints are closed).",
      format: String,
      default: '',
      env: 'API_KEYS',
      sensitive: true,
    },
  },
  agents: {
    export_dir: { doc: 'Folder DELETE /v1/agents/{id} with export_data writes its export files to.', format: String, default: './exports', env: 'AGENTS_EXPORT_DIR' },
  },
  responses: {
    event_retention_ms: {
      doc: 'How long the streaming events of a background response are kept after it ended, for GET /v1/responses/{id}?stream=true (a broken stream read again), in ms.',
      format: 'positive-int',
      default: 86_400_000,
      env: 'RESPONSES_EVENT_RETENTION_MS',
    },
  },
  mcp_servers: {
    doc: 'Tool servers: mcp_servers.<name> with transport (stdio or http), command, args, env, url, headers, per_user, timeout_ms, require_approval.',
    // `Object` keeps convict from reading the names as schema keys; load-config validates the entries.
    format: Object,
    default: {},
  },
  webhooks: {
    allow_http: { doc: 'Accept http:// webhook URLs (development and tests only).', format: Boolean, default: false, env: 'WEBHOOKS_ALLOW_HTTP' },
    allow_private_targets: {
      doc: 'Accept webhook targets on private, loopback or link-local addresses (development and tests only).',
      format: Boolean,
      default: false,
      env: 'WEBHOOKS_ALLOW_PRIVATE_TARGETS',
    },
    max_attempts: { doc: 'Attempts of one webhook delivery before it is marked failed.', format: 'positive-int', default: 8, env: 'WEBHOOKS_MAX_ATTEMPTS' },
    initial_backoff_ms: { doc: 'Wait before the second attempt of a delivery, doubled after each failure, in ms.', format: 'positive-int', default: 1000, env: 'WEBHOOKS_INITIAL_BACKOFF_MS' },
    max_backoff_ms: { doc: 'Longest wait between two attempts of a delivery, in ms.', format: 'positive-int', default: 300_000, env: 'WEBHOOKS_MAX_BACKOFF_MS' },
    timeout_ms: { doc: 'Time-out of one delivery attempt, in ms.', format: 'positive-int', default: 10_000, env: 'WEBHOOKS_TIMEOUT_MS' },
    poll_ms: { doc: 'Interval at which pending deliveries are looked for, in ms.', format: 'positive-int', default: 500, env: 'WEBHOOKS_POLL_MS' },
  },
  // OpenTelemetry's own variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
  // tracing is on when an OTLP endpoint is set, unless OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true.
  tracing: {
    endpoint: {
      doc: 'OTLP/HTTP base URL of a trace collector (Jaeger, Tempo, an OpenTelemetry Collector: http://localhost:4318); traces go to its /v1/traces. Empty: tracing off (unless traces_endpoint is set).',
      format: 'optional-http-url',
      default: '',
      env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    },
    traces_endpoint: {
      doc: 'The full OTLP/HTTP URL traces are sent to, as is (e.g. Langfuse: https://cloud.langfuse.com/api/public/otel/v1/traces); wins over endpoint.',
      format: 'optional-http-url',
      default: '',
      env: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    },
    protocol: {
      doc: 'How spans are sent: `http/protobuf` or `http/json` (`grpc` is refused: no gRPC exporter is installed; collectors take OTLP/HTTP on port 4318).',
      format: ['http/protobuf', 'http/json', 'grpc'],
      default: 'http/protobuf',
      env: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    },
    headers: {
      doc: 'Headers sent with every export, as `name=value` pairs separated by commas, values URL-encoded (e.g. `Authorization=Basic%20…` for Langfuse).',
      format: String,
      default: '',
      env: 'OTEL_EXPORTER_OTLP_HEADERS',
      sensitive: true,
    },
    timeout_ms: { doc: 'Time-out of one export request, in ms.', format: 'positive-int', default: 10_000, env: 'OTEL_EXPORTER_OTLP_TIMEOUT' },
    exporter: { doc: '`otlp`, or `none` to turn tracing off whatever the endpoint.', format: ['otlp', 'none'], default: 'otlp', env: 'OTEL_TRACES_EXPORTER' },
    sdk_disabled: { doc: 'Turns tracing off whatever the endpoint.', format: Boolean, default: false, env: 'OTEL_SDK_DISABLED' },
    service_name: { doc: 'The `service.name` of every span, and the agent name of turn spans.', format: String, default: 'svc-agent', env: 'OTEL_SERVICE_NAME' },
    sampler: {
      doc: 'Which traces are kept: `parentbased_always_on` (all, unless an incoming traceparent says not sampled), `parentbased_traceidratio` (a share, `sampler_arg`), `always_on`, `always_off`, `traceidratio`, `parentbased_always_off`.',
      format: ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'],
      default: 'parentbased_always_on',
      env: 'OTEL_TRACES_SAMPLER',
    },
    sampler_arg: { doc: 'The share of traces the `traceidratio` samplers keep, from 0 to 1.', format: 'ratio', default: 1, env: 'OTEL_TRACES_SAMPLER_ARG' },
    bsp_schedule_delay_ms: { doc: 'Spans are sent in batches at least this often, in ms.', format: 'positive-int', default: 5000, env: 'OTEL_BSP_SCHEDULE_DELAY' },
    bsp_export_timeout_ms: { doc: 'Time-out of sending one batch of spans, in ms.', format: 'positive-int', default: 30_000, env: 'OTEL_BSP_EXPORT_TIMEOUT' },
    bsp_max_queue_size: { doc: 'Spans waiting to be sent at most; more are dropped.', format: 'positive-int', default: 2048, env: 'OTEL_BSP_MAX_QUEUE_SIZE' },
    bsp_max_export_batch_size: { doc: 'Spans in one export request at most.', format: 'positive-int', default: 512, env: 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE' },
    capture_message_content: {
      doc: 'Record the messages sent to and received from the LLM, the system instructions, and tool call arguments and results in the spans (they may hold personal data).',
      format: Boolean,
      default: false,
      env: 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT',
    },
  },
};
