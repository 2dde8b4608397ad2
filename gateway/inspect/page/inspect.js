// The session inspector page: sessions from /inspect/sessions, the state graph from
// /inspect/graph.svg, live runtime events from /inspect/events (SSE read with fetch, so the
// API key can go in the Authorization header), and a session's history and calls from /inspect/sessions/{id}/.

const KEY_STORAGE = 'svc-agent.inspect.api-key';
const RECONNECT_MS = 2000;
const REFRESH_MS = 200;
const HISTORY_PAGE = 100;
/** The transition reasons of a turn ended by a failed call: its way to the resting state is an error edge. */
const FAILURE_REASONS = new Set(['llm_error', 'tool_error']);
/** The runtime events after which a session may have new calls recorded. */
const CALL_EVENTS = new Set(['llm:reply', 'llm:error', 'tool:call', 'turn:completed']);

const $ = (id) => document.getElementById(id);

const page = {
  key: sessionStorage.getItem(KEY_STORAGE),
  sessions: [],
  /** The chosen session and what is shown of it. */
  selected: null,
  lastTransitionId: null,
  lastMessageId: null,
  storedTransitions: [],
  /** The chosen session's calls shown: the newest one's id, and each turn's group by turn id. */
  lastCallId: null,
  turns: new Map(),
  /** Where a call's trace opens (`inspect.trace_url`, `{trace_id}` in it), or null: the trace id is shown as text. */
  traceUrl: null,
  /** Changes at each choice of a session: a calls load begun for an earlier choice drops what it read. */
  view: {},
  /** Transitions seen live and not stored yet (they are stored when the turn ends). */
  liveTransitions: [],
  /** History loads of one kind run one after the other. */
  transitionsLoad: Promise.resolve(),
  messagesLoad: Promise.resolve(),
  callsLoad: Promise.resolve(),
  refreshTimer: null,
  stream: null,
  /** Session list reads sent, and the newest one shown: an older answer arriving late is dropped. */
  listsRequested: 0,
  listShown: 0,
  /** `listsRequested` when the chosen session's last live state change arrived: lists read before it are older than the drawing. */
  stateSeenAt: 0,
};

/** A refused API key: the page asks for another. */
class KeyRefused extends Error {}

function headers() {
  return page.key ? { Authorization: `Bearer ${page.key}` } : {};
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    return body?.error?.message ?? `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

/** GET on one of the inspector's own data routes; a 401 means the key is missing or wrong. */
async function inspectorData(path, as = 'json') {
  const response = await fetch(path, { headers: headers() });
  if (response.status === 401) throw new KeyRefused(await errorMessage(response));
  if (!response.ok) throw new Error(await errorMessage(response));
  return as === 'json' ? response.json() : response.text();
}

function askForKey(message) {
  page.stream?.abort();
  $('inspector').hidden = true;
  $('key-form').hidden = false;
  $('key-error').hidden = !message;
  $('key-error').textContent = message ?? '';
  $('key-input').focus();
}

$('key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  page.key = $('key-input').value.trim();
  sessionStorage.setItem(KEY_STORAGE, page.key);
  $('key-input').value = '';
  void open();
});

/** Loads the sessions and the graph, then follows the event stream; asks for a key when one is needed. */
async function open() {
  try {
    await loadSessions();
    page.traceUrl = (await inspectorData('/inspect/settings')).trace_url;
    const svg = await inspectorData('/inspect/graph.svg', 'text');
    const drawing = new DOMParser().parseFromString(svg, 'image/svg+xml').documentElement;
    $('graph').replaceChildren(document.importNode(drawing, true));
    markErrorEdges();
  } catch (error) {
    if (error instanceof KeyRefused) return askForKey(page.key ? error.message : null);
    $('history-note').hidden = false;
    $('history-note').textContent = `The inspector could not load: ${error.message}`;
  }
  $('key-form').hidden = true;
  $('inspector').hidden = false;
  // A link to a session (/inspect?session=ID) opens it.
  const linked = new URL(location.href).searchParams.get('session');
  if (linked && page.selected !== linked) select(linked);
  if (page.selected) showState(sessionById(page.selected)?.state);
  followEvents();
}

async function loadSessions() {
  const ticket = ++page.listsRequested;
  const list = await inspectorData('/inspect/sessions');
  if (ticket < page.listShown) return;
  page.listShown = ticket;
  page.sessions = list.data;
  renderSessions();
  // A list read after the last live change knows the chosen session's state at least as well as the drawing.
  if (page.selected && ticket > page.stateSeenAt) showState(sessionById(page.selected)?.state);
}

function sessionById(id) {
  return page.sessions.find((session) => session.id === id);
}

/** Many events in a row cost one reload of the list. */
function refreshSessionsSoon() {
  if (page.refreshTimer) return;
  page.refreshTimer = setTimeout(() => {
    page.refreshTimer = null;
    loadSessions().catch((error) => {
      if (error instanceof KeyRefused) askForKey(error.message);
    });
  }, REFRESH_MS);
}

function cell(text) {
  const td = document.createElement('td');
  td.textContent = text;
  return td;
}

function timeOf(iso) {
  return new Date(iso).toLocaleTimeString();
}

function renderSessions() {
  const rows = page.sessions.map((session) => {
    const row = document.createElement('tr');
    row.dataset.sessionId = session.id;
    row.classList.toggle('selected', session.id === page.selected);
    const first = cell(session.first_message ?? '');
    first.className = 'first-message';
    first.title = session.first_message ?? '';
    row.append(
      cell(session.id),
      first,
      cell(session.user_id),
      cell(session.state),
      cell(session.status?.replaceAll('_', ' ') ?? 'stored'),
      cell(String(session.transitions)),
      cell(session.pending_approvals.length > 0 ? `${session.pending_approvals.length} waiting` : ''),
      cell(timeOf(session.last_active)),
    );
    row.addEventListener('click', () => select(session.id));
    return row;
  });
  $('sessions').tBodies[0].replaceChildren(...rows);
  $('sessions-empty').hidden = rows.length > 0;
  renderApprovals();
}

/** The tool calls the chosen session holds for its user's approval: server, tool, arguments and request id. */
function renderApprovals() {
  const pending = sessionById(page.selected)?.pending_approvals ?? [];
  $('approvals').hidden = pending.length === 0;
  $('approval-list').replaceChildren(
    ...pending.map((request) => {
      const item = document.createElement('li');
      const call = document.createElement('code');
      call.textContent = `${request.server_label} · ${request.name}(${request.arguments})`;
      const id = document.createElement('span');
      id.className = 'request-id';
      id.textContent = request.id;
      item.append(call, id);
      return item;
    }),
  );
}

function select(id) {
  page.selected = id;
  // The address names the session, so it can be linked to and reloaded: /inspect?session=ID.
  const address = new URL(location.href);
  address.searchParams.set('session', id);
  history.replaceState(null, '', address);
  page.lastTransitionId = null;
  page.lastMessageId = null;
  page.storedTransitions = [];
  page.liveTransitions = [];
  page.stateSeenAt = 0;
  page.view = {};
  $('session-title').textContent = `Session ${id}`;
  $('history-note').hidden = true;
  $('messages').replaceChildren();
  clearCalls();
  renderSessions();
  renderTransitions();
  showState(sessionById(id)?.state);
  // The list may have been read in the middle of a turn that has ended since: read it again.
  refreshSessionsSoon();
  loadTransitions();
  loadMessages();
  loadCalls();
}

/** Marks `state` on the drawing, keeping the transition marked that led there when it is already the one marked. */
function showState(state) {
  const current = $('graph').querySelector('.state.current')?.dataset.state;
  if (state !== current) highlight(state);
}

/** Marks the state the session is in on the drawing, and the transition that led there. */
function highlight(state, from) {
  const graph = $('graph');
  for (const node of graph.querySelectorAll('.state.current, .transition.taken')) node.classList.remove('current', 'taken');
  if (!state) return;
  graph.querySelector(`.state[data-state="${CSS.escape(state)}"]`)?.classList.add('current');
  if (from) graph.querySelector(`.transition[data-from="${CSS.escape(from)}"][data-to="${CSS.escape(state)}"]`)?.classList.add('taken');
}

/** Every page of `/inspect/sessions/{id}/<kind>` (the agent API's history, open in local mode) after `after`, oldest first. */
async function historyAfter(id, kind, after) {
  const rows = [];
  let cursor = after;
  for (;;) {
    const query = new URLSearchParams({ limit: String(HISTORY_PAGE) });
    if (cursor !== null) query.set('after', String(cursor));
    const response = await fetch(`/inspect/sessions/${encodeURIComponent(id)}/${kind}?${query}`, { headers: headers() });
    if (!response.ok) throw new Error(await errorMessage(response));
    const list = await response.json();
    rows.push(...list.data);
    if (!list.has_more || list.next_after === null || list.next_after === undefined) return rows;
    cursor = list.next_after;
  }
}

function showHistoryError(error) {
  $('history-note').hidden = false;
  $('history-note').textContent = `History not available: ${error.message}`;
}

/** Appends the transitions stored since the last load; as many live rows are now stored ones. */
function loadTransitions() {
  const id = page.selected;
  page.transitionsLoad = page.transitionsLoad.then(async () => {
    if (id !== page.selected) return;
    try {
      const rows = await historyAfter(id, 'transitions', page.lastTransitionId);
      if (id !== page.selected) return;
      page.storedTransitions.push(...rows);
      page.liveTransitions.splice(0, rows.length);
      if (rows.length > 0) page.lastTransitionId = rows.at(-1).id;
      renderTransitions();
    } catch (error) {
      showHistoryError(error);
    }
  });
}

function renderTransitions() {
  const row = (transition, live) => {
    const tr = document.createElement('tr');
    tr.classList.toggle('live', live);
    tr.dataset.from = transition.from;
    tr.dataset.to = transition.to;
    tr.classList.toggle('failure', FAILURE_REASONS.has(transition.reason));
    tr.append(cell(timeOf(transition.at)), cell(transition.from), cell(transition.to), cell(transition.reason ?? ''));
    return tr;
  };
  $('transitions').tBodies[0].replaceChildren(
    ...page.storedTransitions.map((transition) => row(transition, false)),
    ...page.liveTransitions.map((transition) => row(transition, true)),
  );
  markErrorEdges();
}

/** Marks on the drawing each error edge the chosen session has taken (a failed LLM call or tool run). */
function markErrorEdges() {
  const graph = $('graph');
  for (const edge of graph.querySelectorAll('.transition.taken-error')) edge.classList.remove('taken-error');
  for (const transition of [...page.storedTransitions, ...page.liveTransitions]) {
    if (!FAILURE_REASONS.has(transition.reason)) continue;
    const selector = `.transition[data-from="${CSS.escape(transition.from)}"][data-to="${CSS.escape(transition.to)}"]`;
    graph.querySelector(selector)?.classList.add('taken-error');
  }
}

/** Appends the messages stored since the last load. */
function loadMessages() {
  const id = page.selected;
  page.messagesLoad = page.messagesLoad.then(async () => {
    if (id !== page.selected) return;
    try {
      const rows = await historyAfter(id, 'messages', page.lastMessageId);
      if (id !== page.selected || rows.length === 0) return;
      page.lastMessageId = rows.at(-1).id;
      $('messages').append(...rows.map(messageItem));
    } catch (error) {
      showHistoryError(error);
    }
  });
}

function messageItem(message) {
  const item = document.createElement('li');
  item.className = `message role-${message.role}`;
  const role = document.createElement('span');
  role.className = 'role';
  role.textContent = message.role;
  const content = document.createElement('div');
  content.className = 'content';
  content.textContent = typeof message.content === 'string' ? message.content : JSON.stringify(message.content);
  item.append(role, content);
  return item;
}

/** Forgets the calls shown. */
function clearCalls() {
  page.lastCallId = null;
  page.turns = new Map();
  $('calls').replaceChildren();
  $('calls-empty').hidden = true;
}

/** Appends the calls recorded since the last load (`fromStart`: shows them all again). */
function loadCalls({ fromStart = false } = {}) {
  const id = page.selected;
  const view = page.view;
  page.callsLoad = page.callsLoad.then(async () => {
    if (view !== page.view) return;
    try {
      const rows = await historyAfter(id, 'calls', fromStart ? null : page.lastCallId);
      if (view !== page.view) return;
      if (fromStart) clearCalls();
      for (const call of rows) addCall(call);
      if (rows.length > 0) page.lastCallId = rows.at(-1).id;
      $('calls-empty').hidden = page.turns.size > 0;
    } catch (error) {
      showHistoryError(error);
    }
  });
}

/** Adds a call to its turn's group (a new group for a new turn); rows shown stay as they are, opened or not. */
function addCall(call) {
  let turn = page.turns.get(call.turn_id);
  if (!turn) {
    turn = turnGroup(call.turn_id);
    page.turns.set(call.turn_id, turn);
    $('calls').append(turn.item);
  }
  turn.calls.push(call);
  turn.list.append(callItem(call));
  renderTurnHeader(turn);
}

function turnGroup(turnId) {
  const item = document.createElement('li');
  item.className = 'turn';
  item.dataset.turnId = turnId;
  const header = document.createElement('div');
  header.className = 'turn-header';
  const list = document.createElement('ol');
  list.className = 'turn-calls';
  item.append(header, list);
  return { item, header, list, calls: [] };
}

/** A turn's start time, its number of calls, the time from its first call's start to its last call's end, and its failures. */
function renderTurnHeader(turn) {
  const starts = turn.calls.map((call) => Date.parse(call.started_at));
  const ends = turn.calls.map((call, i) => starts[i] + call.duration_ms);
  const failed = turn.calls.filter((call) => call.outcome === 'error').length;
  const cancelled = turn.calls.filter((call) => call.outcome === 'cancelled').length;
  const count = turn.calls.length;
  turn.item.classList.toggle('has-error', failed > 0);
  turn.header.replaceChildren(
    span('turn-time', timeOf(turn.calls[0].started_at)),
    span('turn-count', `${count} ${count === 1 ? 'call' : 'calls'}`),
    span('turn-duration', formatDuration(Math.max(...ends) - Math.min(...starts))),
    ...(failed > 0 ? [span('turn-failed', `${failed} failed`)] : []),
    ...(cancelled > 0 ? [span('turn-cancelled', `${cancelled} cancelled`)] : []),
    span('turn-id', turn.item.dataset.turnId),
  );
}

/** An element of `tag` with a class and its text. */
function textElement(tag, className, text) {
  const element = document.createElement(tag);
  element.className = className;
  element.textContent = text;
  return element;
}

function span(className, text) {
  return textElement('span', className, text);
}

function formatDuration(ms) {
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  return `${ms >= 10 ? Math.round(ms) : Math.round(ms * 10) / 10} ms`;
}

/** One call's row: what it was and how it ended (a failure's error text shown), opening to its context. */
function callItem(call) {
  const item = document.createElement('li');
  const details = document.createElement('details');
  details.className = `call outcome-${call.outcome}`;
  details.dataset.type = call.type;
  details.dataset.callId = String(call.id);
  const summary = document.createElement('summary');
  summary.append(
    span('call-type', call.type === 'llm' ? 'LLM' : 'tool'),
    span('call-state', call.state),
    span('call-name', call.type === 'llm' ? call.model : call.name),
    span('call-duration', formatDuration(call.duration_ms)),
    span('call-outcome', call.outcome),
  );
  if (call.type === 'llm' && call.usage) {
    summary.append(span('call-tokens', `${call.usage.prompt_tokens} prompt + ${call.usage.completion_tokens} completion tokens`));
  }
  if (call.error) summary.append(span('call-error', call.error));
  details.append(summary);
  // A context can be large: it is built when the row is first opened.
  details.addEventListener('toggle', () => {
    if (details.open && !details.querySelector('.call-context')) details.append(callContext(call));
  });
  item.append(details);
  return item;
}

/** What an LLM call was sent (settings, tool names, messages) and how it ended, or a tool call's arguments and result. */
function callContext(call) {
  const context = document.createElement('div');
  context.className = 'call-context';
  if (call.type === 'llm') {
    const usage = call.usage
      ? `${call.usage.prompt_tokens} prompt + ${call.usage.completion_tokens} completion = ${call.usage.total_tokens}${call.usage.estimated ? ' (estimated: the server sent none)' : ''}`
      : 'not reported';
    context.append(
      fields([
        ['started', new Date(call.started_at).toLocaleString()],
        ...traceField(call),
        ['model', call.model],
        ['temperature', call.temperature ?? 'not sent'],
        ['max_tokens', call.max_tokens ?? 'not sent'],
        ['finish reason', call.finish_reason ?? '—'],
        ['tokens', usage],
        ...((call.repairs ?? []).length > 0 ? [['mended for the server', call.repairs.join(', ')]] : []),
      ]),
      ...(call.reasoning ? [heading('Reasoning'), block('call-reasoning', call.reasoning)] : []),
      heading(`Tools (${call.tools.length})`),
    );
    const tools = document.createElement('p');
    tools.className = 'call-tools';
    tools.append(...(call.tools.length > 0 ? call.tools.map((name) => span('tool-name', name)) : [span('note', 'none')]));
    const messages = document.createElement('ol');
    messages.className = 'context-messages';
    messages.append(...call.messages.map(contextMessage));
    context.append(tools, heading(`Messages (${call.messages.length})`), messages);
  } else {
    context.append(
      fields([
        ['started', new Date(call.started_at).toLocaleString()],
        ...traceField(call),
        ['server', call.server ?? '—'],
        ['tool', call.tool ?? '—'],
        ...(call.approval_request_id ? [['approval request', call.approval_request_id]] : []),
      ]),
      heading('Arguments'),
      block('call-arguments', prettyJson(call.arguments)),
      heading('Result'),
      block('call-result', call.result ?? '(none)'),
    );
  }
  return context;
}

/** The trace and span of a call made with tracing on, as Jaeger or Tempo search for them: a link to the trace when the deployment names where traces open. */
function traceField(call) {
  if (!call.trace_id) return [];
  const text = `${call.trace_id} (span ${call.span_id ?? '—'})`;
  if (!page.traceUrl) return [['trace', text]];
  const link = document.createElement('a');
  link.className = 'call-trace';
  link.href = page.traceUrl.replaceAll('{trace_id}', encodeURIComponent(call.trace_id));
  link.target = '_blank';
  link.rel = 'noopener noreferrer';
  link.textContent = text;
  return [['trace', link]];
}

function fields(pairs) {
  const list = document.createElement('dl');
  list.className = 'call-fields';
  for (const [name, value] of pairs) {
    const term = document.createElement('dt');
    term.textContent = name;
    const description = document.createElement('dd');
    if (value instanceof Node) description.append(value);
    else description.textContent = String(value);
    list.append(term, description);
  }
  return list;
}

function heading(text) {
  const element = document.createElement('h4');
  element.textContent = text;
  return element;
}

function block(className, text) {
  return textElement('pre', className, text);
}

/** Arguments as indented JSON when they are JSON, else as sent. */
function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** One message of an LLM call's context: its role, its content, and the tool calls it made or answers. */
function contextMessage(message) {
  const item = document.createElement('li');
  item.className = `context-message role-${message.role}`;
  const role = span('role', message.tool_call_id ? `${message.role} · ${message.tool_call_id}` : message.role);
  item.append(role);
  const text = contentText(message.content);
  if (text) item.append(block('content', text));
  for (const call of message.tool_calls ?? []) {
    item.append(block('tool-call', `${call.function?.name ?? call.type}(${call.function?.arguments ?? ''}) · ${call.id ?? ''}`));
  }
  return item;
}

/** A message's content as text: a string as it is, the text of text parts, other parts as JSON. */
function contentText(content) {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return JSON.stringify(content);
  return content.map((part) => (part?.type === 'text' ? part.text : JSON.stringify(part))).join('\n');
}

function onRuntimeEvent(event) {
  refreshSessionsSoon();
  if (event.session_id !== page.selected) return;
  if (CALL_EVENTS.has(event.type)) loadCalls();
  if (event.type === 'session:state_changed') {
    page.stateSeenAt = page.listsRequested;
    highlight(event.to, event.from);
    page.liveTransitions.push({ at: event.at, from: event.from, to: event.to, reason: event.reason });
    renderTransitions();
  } else if (event.type === 'turn:completed') {
    // A turn stores its transitions as it ends, even one that stored no message (cancelled).
    loadTransitions();
  } else if (event.type === 'memory:written' && event.kind === 'conversation') {
    // Messages are stored: read what is new (the turn's transitions go with its last ones).
    loadMessages();
    loadTransitions();
  }
}

function setConnection(live) {
  $('connection').dataset.status = live ? 'live' : 'offline';
  $('connection').textContent = live ? 'live' : 'offline';
}

/** Reads /inspect/events for as long as the page is open, reconnecting when the stream ends. */
function followEvents() {
  page.stream?.abort();
  const stream = new AbortController();
  page.stream = stream;
  const reconnect = () => {
    setConnection(false);
    if (!stream.signal.aborted) setTimeout(followEvents, RECONNECT_MS);
  };
  fetch('/inspect/events', { headers: headers(), signal: stream.signal })
    .then(async (response) => {
      if (response.status === 401) return askForKey(await errorMessage(response));
      if (!response.ok || !response.body) return reconnect();
      setConnection(true);
      // Events missed while disconnected: the list is read again. Calls are read again from
      // the first: a restarted service without stored calls numbers them from 1 again.
      refreshSessionsSoon();
      if (page.selected) loadCalls({ fromStart: true });
      await readFrames(response.body, onRuntimeEvent);
      reconnect();
    })
    .catch(reconnect);
}

/** Calls `onEvent` with each `data:` frame's JSON; comment lines (keep-alive) are skipped. */
async function readFrames(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice('data: '.length))
        .join('\n');
      if (data) onEvent(JSON.parse(data));
    }
  }
}

void open();
