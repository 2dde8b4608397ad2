import type { SeededRandom } from './seeded-random.js';

/** One malformed (or odd but valid) HTTP request. */
export type FuzzCase = { label: string; method: string; path: string; headers: Record<string, string>; body?: string | Buffer };

/** What the cases aim at: keys, and ids that exist, so that some requests get past the lookups. */
export type FuzzTargets = {
  apiKey: string;
  /** A key bound to `boundUser`. */
  boundKey: string;
  boundUser: string;
  agentIds: string[];
  webhookIds: string[];
  deliveryIds: string[];
  /** Bodies above this many bytes are over the service's limit. */
  bodyLimitBytes: number;
};

/** JSON values of every type and edge, as JSON text. */
const ODD_JSON = [
  'null',
  'true',
  'false',
  '0',
  '-1',
  '1.5',
  '-0',
  '1e308',
  '-1e308',
  '1e999',
  '-1e999',
  '9007199254740993',
  '123456789012345678901234567890',
  '""',
  '"x"',
  '"svc-agent"',
  '"user"',
  JSON.stringify('x'.repeat(256)),
  JSON.stringify('y'.repeat(20_000)),
  '"\\u0000"',
  '"a\\u0000b"',
  '"\\ud800"',
  '"\\udfff\\ud800"',
  '"\\uffff\\ufffe"',
  '"😀 中文 \\u202e"',
  '"%00%ff"',
  '"../../etc/passwd"',
  '"<script>alert(1)</script>"',
  '"\\r\\n\\t\\b\\f"',
  '"NaN"',
  '"[[echo-context]]"',
  '[]',
  '[null]',
  '["a", 1, null]',
  '[[[]]]',
  '{}',
  '{"__proto__": {"polluted": true}}',
  '{"constructor": {"prototype": {"polluted": true}}}',
  '[{"role": "user"}]',
  '{"role": "user", "content": "hi"}',
  '{"type": "text", "text": 5}',
  '[{"type": "image_url", "image_url": {"url": "data:,"}}]',
];

/** Text that is not JSON at all, or breaks JSON where a value goes. */
const NOT_JSON = ['NaN', 'Infinity', '-Infinity', 'undefined', "'single'", '0x10', '01', '.5', '+1', '"unterminated', 'tru', '[1,]', '{"a":1,}', '"\\x00"', '"\\u12"', '/* */ 1'];

/** Header values HTTP allows (no control characters) but the service may not expect. */
const ODD_HEADER_VALUES = [
  '',
  ' ',
  'x'.repeat(255),
  'x'.repeat(256),
  'z'.repeat(8000),
  'é',
  latin1('😀 中文'),
  latin1('\u202e\u200b'),
  '\t',
  'null',
  'undefined',
  '../../x',
  '%00',
  '*',
  'a,b',
  ' spaced ',
  '"quoted"',
  '<>',
  '\xff\xfe',
];

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/json; charset=bogus',
  'application/json;;;',
  'text/plain',
  'text/html',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=fuzz',
  'application/xml',
  'application/octet-stream',
  '*/*',
  'nonsense',
];

const CONTENT_ENCODINGS = ['gzip', 'deflate', 'br', 'identity', 'compress', 'x-unknown', 'gzip, gzip', 'GZIP'];

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'];

const ROUTES = [
  '/v1/chat/completions',
  '/v1/models',
  '/v1/models/svc-agent',
  '/health',
  '/v1/agents',
  '/v1/agents/some-agent',
  '/v1/webhooks',
  '/v1/webhooks/wh_x',
  '/v1/webhooks/wh_x/deliveries',
  '/auth/idp/login',
  '/auth/idp/callback',
  '/auth/idp/accounts',
  '/auth/idp/disconnect',
  '/',
  '/v1',
  '/metrics',
  '/inspect',
];

/** Path segments: odd ids, percent-encoded, and raw malformed escapes. */
const ODD_SEGMENTS = [
  '',
  '.',
  '..',
  '%2e%2e',
  '%',
  '%zz',
  '%c0%80',
  '%ED%A0%80',
  '%FF',
  '%00',
  'a%00b',
  '%2F',
  '%25',
  encodeURIComponent('😀'),
  encodeURIComponent('x'.repeat(256)),
  encodeURIComponent('é'.repeat(255)),
  'x'.repeat(2000),
  encodeURIComponent('<script>'),
  encodeURIComponent("'; drop table conversations; --"),
  'null',
  '-1',
];

/** Query values: numbers out of range, odd encodings, cursors that decode to impossible dates. */
const ODD_QUERY_VALUES = [
  '',
  '-1',
  '0',
  '1',
  '101',
  '1e3',
  '1.5',
  'NaN',
  '999999999999999999999',
  '%20%201',
  '%00',
  '%',
  '%zz',
  encodeURIComponent('x'.repeat(300)),
  encodeURIComponent('😀'),
  base64url('9007199254740991'),
  base64url('8640000000000001'),
  base64url('-5'),
  base64url('1.5'),
  base64url('0'),
  base64url('1:\u0000'),
  base64url(`1:${'x'.repeat(256)}`),
  'AAAA',
  '====',
];

const EVENT_TYPES = ['agent.created', 'agent.state_changed', 'memory.consolidated', 'tool.executed', 'error.occurred', '*'];

/** One random case; the mix favours the chat endpoint, where most of the parsing is. */
export function fuzzCase(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const generators: Array<[number, (random: SeededRandom, targets: FuzzTargets) => FuzzCase]> = [
    [30, chatFieldMutation],
    [5, chatRandomBytes],
    [7, chatTruncated],
    [3, chatDeepNesting],
    [10, chatOddHeaders],
    [6, wrongMethod],
    [2, oversizeBody],
    [9, agentsRequest],
    [10, webhooksRequest],
    [3, modelsAndHealth],
    [8, authRequest],
    [7, oddPath],
  ];
  const total = generators.reduce((sum, [weight]) => sum + weight, 0);
  let roll = random.next() * total;
  for (const [weight, generate] of generators) {
    roll -= weight;
    if (roll < 0) return generate(random, targets);
  }
  return chatFieldMutation(random, targets);
}

function chatFieldMutation(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const body = mutate(random, validChatBody(random));
  return { label: 'chat field mutation', method: 'POST', path: '/v1/chat/completions', headers: keyHeaders(random, targets, 'application/json'), body };
}

function chatRandomBytes(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const body = random.bytes(random.between(1, 4096));
  return { label: 'chat random bytes', method: 'POST', path: '/v1/chat/completions', headers: keyHeaders(random, targets, random.pick(CONTENT_TYPES)), body };
}

function chatTruncated(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const whole = JSON.stringify(validChatBody(random));
  const body = whole.slice(0, random.between(0, whole.length - 1));
  return { label: 'chat truncated JSON', method: 'POST', path: '/v1/chat/completions', headers: keyHeaders(random, targets, 'application/json'), body };
}

function chatDeepNesting(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const depth = random.pick([64, 1000, 10_000, 100_000]);
  const nested = random.chance(0.5) ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  const body = random.pick([
    `{"messages":${nested}}`,
    `{"messages":[{"role":"user","content":"hi","extra":${nested}}]}`,
    `{"messages":[{"role":"user","content":${nested}}]}`,
    `{"tools":[{"type":"function","function":{"name":"f","parameters":${nested}}}],"messages":[{"role":"user","content":"hi"}]}`,
    nested,
  ]);
  return { label: `chat nested ${depth} deep`, method: 'POST', path: '/v1/chat/completions', headers: keyHeaders(random, targets, 'application/json'), body };
}

function chatOddHeaders(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const headers = keyHeaders(random, targets, 'application/json');
  const names = ['X-Session-ID', 'X-User-ID', 'Authorization', 'Content-Type', 'Content-Encoding', 'X-Request-ID', 'Accept', 'Accept-Encoding'];
  for (let count = random.between(1, 3); count > 0; count -= 1) {
    const name = random.pick(names);
    headers[name] =
      name === 'Content-Type'
        ? random.pick(CONTENT_TYPES)
        : name === 'Content-Encoding'
          ? random.pick(CONTENT_ENCODINGS)
          : name === 'Authorization'
            ? random.pick(['Bearer', 'Bearer ', `Bearer ${targets.apiKey}x`, `Basic ${targets.apiKey}`, `bearer ${targets.boundKey}`, `Bearer ${targets.apiKey} extra`, ...ODD_HEADER_VALUES])
            : random.pick(ODD_HEADER_VALUES);
  }
  if (random.chance(0.2)) headers['X-Session-ID'] = random.pick(targets.agentIds);
  return { label: 'chat odd headers', method: 'POST', path: '/v1/chat/completions', headers, body: JSON.stringify(validChatBody(random)) };
}

function wrongMethod(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const method = random.pick(METHODS);
  const body = method === 'GET' || method === 'HEAD' || random.chance(0.5) ? undefined : random.pick([...ODD_JSON, ...NOT_JSON]);
  return { label: 'any method, any route', method, path: random.pick(ROUTES), headers: keyHeaders(random, targets, 'application/json'), body };
}

function oversizeBody(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const size = targets.bodyLimitBytes + random.between(1, 4 * targets.bodyLimitBytes);
  const content = 'o'.repeat(size);
  const [method, path, body] = random.pick([
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content }] })],
    ['POST', '/v1/webhooks', JSON.stringify({ url: 'https://example.com/hook', events: ['*'], secret: content })],
    ['DELETE', `/v1/agents/${targets.agentIds[0]}`, JSON.stringify({ preserve_memory: true, padding: content })],
    ['POST', '/v1/chat/completions', content],
  ] as const);
  return { label: `body of ${size} bytes`, method, path, headers: keyHeaders(random, targets, 'application/json'), body };
}

function agentsRequest(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const headers = keyHeaders(random, targets, 'application/json');
  const id = random.chance(0.4) ? encodeURIComponent(random.pick(targets.agentIds)) : random.pick(ODD_SEGMENTS);
  const choice = random.between(0, 2);
  if (choice === 0) {
    const query = queryString(random, ['limit', 'after', 'user_id']);
    return { label: 'list agents', method: 'GET', path: `/v1/agents${query}`, headers };
  }
  if (choice === 1) return { label: 'get agent', method: 'GET', path: `/v1/agents/${id}`, headers };
  const body = random.chance(0.2) ? undefined : mutate(random, { preserve_memory: random.chance(0.5), export_data: random.chance(0.3) });
  return { label: 'delete agent', method: 'DELETE', path: `/v1/agents/${id}`, headers, body };
}

function webhooksRequest(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const headers = keyHeaders(random, targets, 'application/json');
  const id = random.chance(0.4) ? random.pick(targets.webhookIds) : random.pick(ODD_SEGMENTS);
  switch (random.between(0, 5)) {
    case 0: {
      const base = {
        url: random.pick(['https://127.0.0.1:9/hook', 'http://127.0.0.1:9/hook', 'https://[::1]/x', 'ftp://x/y', 'https://user:pw@127.0.0.1/', 'not a url']),
        events: [random.pick(EVENT_TYPES)],
        secret: 's'.repeat(random.between(10, 40)),
        active: random.chance(0.5),
      };
      return { label: 'create webhook', method: 'POST', path: '/v1/webhooks', headers, body: mutate(random, base) };
    }
    case 1:
      return { label: 'get webhook', method: 'GET', path: `/v1/webhooks/${id}`, headers };
    case 2:
      return { label: 'patch webhook', method: 'PATCH', path: `/v1/webhooks/${id}`, headers, body: mutate(random, { active: random.chance(0.5) }) };
    case 3:
      return { label: 'delete webhook', method: 'DELETE', path: `/v1/webhooks/${id}`, headers };
    case 4:
      return { label: 'list deliveries', method: 'GET', path: `/v1/webhooks/${id}/deliveries${queryString(random, ['limit', 'after'])}`, headers };
    default: {
      const delivery = random.chance(0.5) && targets.deliveryIds.length > 0 ? random.pick(targets.deliveryIds) : random.pick(ODD_SEGMENTS);
      return { label: 'redeliver', method: 'POST', path: `/v1/webhooks/${id}/deliveries/${delivery}/redeliver`, headers };
    }
  }
}

function modelsAndHealth(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const path = random.pick([`/v1/models/${random.pick(ODD_SEGMENTS)}`, `/health${queryString(random, ['verbose', 'x'])}`, `/v1/models${queryString(random, ['limit'])}`]);
  return { label: 'models and health', method: 'GET', path, headers: keyHeaders(random, targets, 'application/json') };
}

function authRequest(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const headers = keyHeaders(random, targets, 'application/json');
  if (random.chance(0.3)) headers['X-User-ID'] = random.pick(ODD_HEADER_VALUES);
  switch (random.between(0, 3)) {
    case 0:
      return { label: 'oauth login', method: 'GET', path: `/auth/idp/login${queryString(random, ['user_id', 'user_id', 'redirect'])}`, headers };
    case 1: {
      const state = random.pick([...ODD_QUERY_VALUES, 'abcDEF123_-', 'a'.repeat(255), 'a'.repeat(256)]);
      const extra = random.chance(0.3) ? `&error=${random.pick(['access_denied', 'server_error', '%00'])}&error_description=${random.pick(ODD_QUERY_VALUES)}` : '';
      return { label: 'oauth callback', method: 'GET', path: `/auth/idp/callback?state=${state}&code=${random.pick(ODD_QUERY_VALUES)}${extra}`, headers };
    }
    case 2:
      return { label: 'oauth accounts', method: random.pick(['GET', 'DELETE']), path: `/auth/idp/accounts${queryString(random, ['user_id'])}`, headers };
    default:
      return { label: 'oauth disconnect', method: 'POST', path: '/auth/idp/disconnect', headers, body: mutate(random, { user_id: 'fuzz-user' }) };
  }
}

function oddPath(random: SeededRandom, targets: FuzzTargets): FuzzCase {
  const segments = Array.from({ length: random.between(1, 4) }, () => random.pick([...ODD_SEGMENTS, 'v1', 'chat', 'completions', 'agents', 'webhooks', 'auth', 'idp']));
  const path = `/${segments.join('/')}${random.chance(0.3) ? queryString(random, ['a', 'user_id']) : ''}`;
  return { label: 'odd path', method: random.pick(METHODS), path, headers: keyHeaders(random, targets, 'application/json') };
}

/** A valid chat request the mutations start from. */
function validChatBody(random: SeededRandom): Record<string, unknown> {
  const messages: Array<Record<string, unknown>> = [];
  if (random.chance(0.3)) messages.push({ role: 'system', content: 'Be brief.' });
  for (let turn = random.between(0, 2); turn > 0; turn -= 1) {
    messages.push({ role: 'user', content: `question ${turn}` }, { role: 'assistant', content: `answer ${turn}` });
  }
  messages.push({ role: 'user', content: random.chance(0.2) ? [{ type: 'text', text: 'parts' }] : `fuzz ${random.between(0, 1e6)}` });
  const body: Record<string, unknown> = { model: random.pick(['svc-agent', 'svc-default', 'other']), messages, stream: random.chance(0.4) };
  if (random.chance(0.5)) body.temperature = random.pick([0, 0.7, 2]);
  if (random.chance(0.5)) body.max_tokens = random.between(1, 100);
  if (random.chance(0.3)) body.user_id = `fuzz-user-${random.between(0, 3)}`;
  if (random.chance(0.3)) body.session_id = `fuzz-session-${random.between(0, 20)}`;
  if (random.chance(0.2)) body.stream_options = { include_usage: true };
  if (random.chance(0.2)) body.tools = [{ type: 'function', function: { name: 'lookup', description: 'Looks up', parameters: { type: 'object', properties: {} } } }];
  return body;
}

/**
 * The JSON text of `value` with one to three changes: a field (at any depth) replaced by an
 * odd value or by text that is not JSON, a field removed, or an unknown field added.
 */
function mutate(random: SeededRandom, value: unknown): string {
  const copy = structuredClone(value) as Record<string, unknown>;
  const replacements = new Map<string, string>();
  for (let count = random.between(1, 3); count > 0; count -= 1) {
    const paths = leafAndContainerPaths(copy);
    const path = random.pick(paths);
    const action = random.between(0, 9);
    if (action === 0 && path.length > 0) {
      removeAt(copy, path);
      continue;
    }
    const marker = `__fuzz_${replacements.size}__`;
    replacements.set(marker, oddValue(random));
    if (action === 1) addUnknownField(random, copy, paths, marker);
    else if (path.length === 0) return replacements.get(marker)!;
    else setAt(copy, path, marker);
  }
  let text = JSON.stringify(copy);
  for (const [marker, raw] of replacements) text = text.replace(JSON.stringify(marker), raw);
  return text;
}

function oddValue(random: SeededRandom): string {
  if (random.chance(0.1)) return random.pick(NOT_JSON);
  if (random.chance(0.05)) {
    const depth = random.between(10, 5000);
    return `${'['.repeat(depth)}${']'.repeat(depth)}`;
  }
  return random.pick(ODD_JSON);
}

type Path = Array<string | number>;

function leafAndContainerPaths(value: unknown, prefix: Path = []): Path[] {
  const paths: Path[] = [prefix];
  if (Array.isArray(value)) value.forEach((item, index) => paths.push(...leafAndContainerPaths(item, [...prefix, index])));
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) paths.push(...leafAndContainerPaths(item, [...prefix, key]));
  }
  return paths;
}

function parentOf(root: unknown, path: Path): Record<string | number, unknown> {
  return path.slice(0, -1).reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], root) as Record<string | number, unknown>;
}

function setAt(root: unknown, path: Path, value: unknown): void {
  parentOf(root, path)[path.at(-1)!] = value;
}

function removeAt(root: unknown, path: Path): void {
  const parent = parentOf(root, path);
  const key = path.at(-1)!;
  if (Array.isArray(parent)) parent.splice(key as number, 1);
  else delete parent[key];
}

function addUnknownField(random: SeededRandom, root: Record<string, unknown>, paths: Path[], marker: string): void {
  const objects = paths.filter((path) => {
    const node = path.reduce<unknown>((current, key) => (current as Record<string | number, unknown>)[key], root);
    return node !== null && typeof node === 'object' && !Array.isArray(node);
  });
  const target = random.pick(objects).reduce<unknown>((current, key) => (current as Record<string | number, unknown>)[key], root) as Record<string, unknown>;
  target[random.pick(['unknown_field', 'n', 'functions', 'response_format', 'logprobs', 'seed', 'stop', 'tool_choice'])] = marker;
}

/** The headers most requests carry: usually the right key, sometimes a bound, wrong or missing one. */
function keyHeaders(random: SeededRandom, targets: FuzzTargets, contentType: string): Record<string, string> {
  const headers: Record<string, string> = { 'Content-Type': contentType };
  const roll = random.next();
  if (roll < 0.75) headers.Authorization = `Bearer ${targets.apiKey}`;
  else if (roll < 0.88) headers.Authorization = `Bearer ${targets.boundKey}`;
  else if (roll < 0.94) headers.Authorization = 'Bearer wrong-key';
  if (random.chance(0.15)) headers['X-User-ID'] = random.chance(0.5) ? targets.boundUser : `fuzz-user-${random.between(0, 3)}`;
  return headers;
}

function queryString(random: SeededRandom, names: string[]): string {
  const pairs = names.filter(() => random.chance(0.6)).map((name) => `${name}=${random.pick(ODD_QUERY_VALUES)}`);
  return pairs.length > 0 ? `?${pairs.join('&')}` : '';
}

/** The UTF-8 bytes of `text` as a latin1 string: what a client sending raw UTF-8 in a header puts on the wire. */
function latin1(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}
