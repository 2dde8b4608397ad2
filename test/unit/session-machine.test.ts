import { expect } from 'chai';
import { createActor, fromPromise, waitFor } from 'xstate';
import type { Actor } from 'xstate';
import { createSessionMachine, isRestingState, stateTypeOf, validateGraph } from '../../machines/index.js';
import type {
  AgentReply,
  CallLlmInput,
  RunToolsInput,
  SessionMachine,
  StateGraph,
  ToolResult,
} from '../../machines/index.js';
import type { ChatMessage, ToolCall } from '../../runtime/chat-types.js';

function parse(raw: unknown): StateGraph {
  const result = validateGraph(raw);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.graph;
}

const state = (type: string, next: string[], extra: Record<string, unknown> = {}) => ({
  description: `a ${type} state`,
  type,
  transition: { next },
  ...extra,
});

const DEFAULT_GRAPH = parse({
  initial: 'agent_reply',
  states: {
    ask_user: state('user', ['agent_reply']),
    agent_reply: state('agent', ['ask_user', 'use_tool']),
    use_tool: state('tool', ['agent_reply']),
  },
});

const USER_HI: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'hi' },
];

function toolCall(id: string, name = 'echo', args = '{"text":"x"}'): ToolCall {
  return { id, type: 'function', function: { name, arguments: args } };
}

function reply(content: string, toolCalls: ToolCall[] = []): AgentReply {
  return { content, toolCalls, finishReason: toolCalls.length > 0 ? 'tool_calls' : 'stop', usage: null };
}

/** A scripted LLM: answers each call with the next reply (or throws the next error) and records the inputs. */
function scriptedLlm(script: Array<AgentReply | Error | ((input: CallLlmInput) => AgentReply)>) {
  const calls: CallLlmInput[] = [];
  const logic = fromPromise<AgentReply, CallLlmInput>(async ({ input }) => {
    calls.push(structuredClone(input));
    const next = script[calls.length - 1];
    if (next === undefined) throw new Error(`no scripted reply for call ${calls.length}`);
    if (next instanceof Error) throw next;
    return typeof next === 'function' ? next(input) : next;
  });
  return { logic, calls };
}

/** A tool runner that echoes each call's name and records the inputs. */
function echoTools() {
  const calls: RunToolsInput[] = [];
  const logic = fromPromise<ToolResult[], RunToolsInput>(async ({ input }) => {
    calls.push(structuredClone(input));
    return input.toolCalls.map((call) => ({ toolCallId: call.id, name: call.function.name, content: `ran ${call.function.name}`, isError: false }));
  });
  return { logic, calls };
}

/** A fake whose promise stays pending until its signal aborts; `started` resolves with that signal. */
function pendingUntilAborted<TOutput, TInput>() {
  let resolveStarted!: (signal: AbortSignal) => void;
  const started = new Promise<AbortSignal>((resolve) => (resolveStarted = resolve));
  const logic = fromPromise<TOutput, TInput>(
    ({ signal }) =>
      new Promise<TOutput>((_, reject) => {
        signal.addEventListener('abort', () => reject(new Error('aborted')));
        resolveStarted(signal);
      }),
  );
  return { logic, started };
}

type SessionActor = Actor<SessionMachine>;

function nextTurnCompleted(actor: SessionActor): Promise<void> {
  return new Promise((resolve) => {
    const subscription = actor.on('turn.completed', () => {
      subscription.unsubscribe();
      resolve();
    });
  });
}

/** Starts an actor and resolves when its first turn completes; also records every state it passes through. */
async function runFirstTurn(machine: SessionMachine, maxToolRounds = 4, messages = USER_HI, maxHandoffs = 5) {
  const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds, maxHandoffs, messages } });
  const visited: string[] = [];
  actor.subscribe((snapshot) => {
    if (visited.at(-1) !== snapshot.value) visited.push(String(snapshot.value));
  });
  const completed = nextTurnCompleted(actor);
  actor.start();
  await completed;
  return { actor, visited, snapshot: actor.getSnapshot() };
}

describe('createSessionMachine', () => {
  it('ends in ask_user and emits turn.completed when the LLM gives a plain reply', async () => {
    const llm = scriptedLlm([reply('hello')]);
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic } });
    const { snapshot, visited } = await runFirstTurn(machine);

    expect(visited).to.deep.equal(['agent_reply', 'ask_user']);
    expect(snapshot.value).to.equal('ask_user');
    expect(snapshot.context).to.deep.include({ reason: 'reply', transitions: 1, round: 0, failure: null });
    expect(snapshot.context.reply?.content).to.equal('hello');
    expect(snapshot.context.messages).to.deep.equal([...USER_HI, { role: 'assistant', content: 'hello' }]);
    expect(llm.calls).to.have.length(1);
    expect(llm.calls[0]).to.deep.include({ sessionId: 's1', state: 'agent_reply', messages: USER_HI });
    expect(llm.calls[0]!.stateConfig.type).to.equal('agent');
  });

  it('goes through use_tool and back to agent_reply when the reply has tool calls', async () => {
    const calls = [toolCall('call_1', 'echo'), toolCall('call_2', 'get_sum', '{"a":1,"b":2}')];
    const llm = scriptedLlm([reply('', calls), reply('done')]);
    const tools = echoTools();
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic, runTools: tools.logic } });
    const { snapshot, visited } = await runFirstTurn(machine);

    expect(visited).to.deep.equal(['agent_reply', 'use_tool', 'agent_reply', 'ask_user']);
    expect(tools.calls).to.have.length(1);
    expect(tools.calls[0]).to.deep.include({ sessionId: 's1', state: 'use_tool', toolCalls: calls });
    const toolMessages: ChatMessage[] = [
      { role: 'tool', tool_call_id: 'call_1', content: 'ran echo' },
      { role: 'tool', tool_call_id: 'call_2', content: 'ran get_sum' },
    ];
    expect(llm.calls[1]!.messages).to.deep.equal([...USER_HI, { role: 'assistant', content: '', tool_calls: calls }, ...toolMessages]);
    expect(snapshot.context.messages.at(-1)).to.deep.equal({ role: 'assistant', content: 'done' });
    expect(snapshot.context).to.deep.include({ round: 1, transitions: 3, reason: 'reply' });
  });

  it('records why each transition was taken when a turn uses tools', async () => {
    const llm = scriptedLlm([reply('', [toolCall('call_1')]), reply('done')]);
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic, runTools: echoTools().logic } });
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, maxHandoffs: 5, messages: USER_HI } });
    const reasons: string[] = [];
    actor.subscribe((snapshot) => {
      if (snapshot.context.transitions > reasons.length) reasons.push(snapshot.context.reason);
    });
    const completed = nextTurnCompleted(actor);
    actor.start();
    await completed;
    expect(reasons).to.deep.equal(['tool_calls', 'tool_results', 'reply']);
  });

  it('drops further tool calls and ends the turn when the tool-round cap is reached', async () => {
    const llm = scriptedLlm([reply('', [toolCall('call_1')]), reply('still want tools', [toolCall('call_2')])]);
    const tools = echoTools();
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic, runTools: tools.logic } });
    const { snapshot, visited } = await runFirstTurn(machine, 1);

    expect(visited).to.deep.equal(['agent_reply', 'use_tool', 'agent_reply', 'ask_user']);
    expect(tools.calls).to.have.length(1);
    expect(snapshot.context).to.deep.include({ reason: 'tool_round_limit', round: 1 });
    expect(snapshot.context.reply?.toolCalls).to.have.length(1);
    // The dropped calls stay out of the working context: they would have no results after them.
    expect(snapshot.context.messages.at(-1)).to.deep.equal({ role: 'assistant', content: 'still want tools' });
  });

  it('sets failure and ends in the user state when the LLM call fails', async () => {
    const llm = scriptedLlm([new Error('connect ECONNREFUSED 127.0.0.1:30000')]);
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic } });
    const { snapshot } = await runFirstTurn(machine);

    expect(snapshot.value).to.equal('ask_user');
    expect(snapshot.status).to.equal('active');
    expect(snapshot.context.failure).to.deep.equal({ source: 'llm', message: 'connect ECONNREFUSED 127.0.0.1:30000' });
    expect(snapshot.context).to.deep.include({ reason: 'llm_error', transitions: 1 });
  });

  it('sets a tool failure and ends in the user state when the tool runner fails', async () => {
    const llm = scriptedLlm([reply('', [toolCall('call_1')])]);
    const runTools = fromPromise<ToolResult[], RunToolsInput>(async () => {
      throw new Error('tool registry is down');
    });
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic, runTools } });
    const { snapshot, visited } = await runFirstTurn(machine);

    expect(visited).to.deep.equal(['agent_reply', 'use_tool', 'ask_user']);
    expect(snapshot.context.failure).to.deep.equal({ source: 'tool', message: 'tool registry is down' });
    expect(snapshot.context.reason).to.equal('tool_error');
    expect(llm.calls).to.have.length(1);
  });

  it('fails the turn with "not provided" when the runtime has not filled the actor slots', async () => {
    const { snapshot } = await runFirstTurn(createSessionMachine(DEFAULT_GRAPH));
    expect(snapshot.value).to.equal('ask_user');
    expect(snapshot.context.failure?.message).to.match(/callLlm actor not provided/);
  });

  it('aborts the in-flight LLM call and goes to the user state when the turn is cancelled', async () => {
    const llm = pendingUntilAborted<AgentReply, CallLlmInput>();
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic } });
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, maxHandoffs: 5, messages: USER_HI } });
    const completed = nextTurnCompleted(actor);
    actor.start();
    const signal = await llm.started;
    expect(signal.aborted).to.equal(false);

    actor.send({ type: 'turn.cancel' });
    await completed;
    expect(signal.aborted).to.equal(true);
    expect(actor.getSnapshot().value).to.equal('ask_user');
    expect(actor.getSnapshot().context).to.deep.include({ reason: 'cancelled', failure: null, transitions: 1 });
  });

  it('aborts the in-flight tool run when the turn is cancelled in the tool state', async () => {
    const llm = scriptedLlm([reply('', [toolCall('call_1')])]);
    const tools = pendingUntilAborted<ToolResult[], RunToolsInput>();
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic, runTools: tools.logic } });
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, maxHandoffs: 5, messages: USER_HI } });
    actor.start();
    const signal = await tools.started;
    expect(actor.getSnapshot().value).to.equal('use_tool');

    actor.send({ type: 'turn.cancel' });
    expect(signal.aborted).to.equal(true);
    expect(actor.getSnapshot().value).to.equal('ask_user');
    expect(actor.getSnapshot().context.reason).to.equal('cancelled');
  });

  it('starts a fresh turn from the sent messages when a user message arrives after a failed turn', async () => {
    const llm = scriptedLlm([new Error('boom'), reply('second answer')]);
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic } });
    const { actor } = await runFirstTurn(machine);
    expect(actor.getSnapshot().context.failure).to.not.equal(null);

    const nextTurn: ChatMessage[] = [...USER_HI, { role: 'assistant', content: 'x' }, { role: 'user', content: 'again' }];
    const completed = nextTurnCompleted(actor);
    actor.send({ type: 'user.message', messages: nextTurn });
    await completed;

    expect(llm.calls[1]!.messages).to.deep.equal(nextTurn);
    const { context } = actor.getSnapshot();
    expect(context).to.deep.include({ failure: null, round: 0, reason: 'reply', transitions: 3 });
    expect(context.messages).to.deep.equal([...nextTurn, { role: 'assistant', content: 'second answer' }]);
  });

  it('hands off from the planner to the reviewer when the graph has two agent states', async () => {
    const graph = parse({
      initial: 'ask_user',
      states: {
        ask_user: state('user', ['planner']),
        planner: state('agent', ['reviewer', 'planner_tools'], { prompt: 'Make a plan.', tools: ['search'] }),
        planner_tools: state('tool', ['planner']),
        reviewer: state('agent', ['ask_user'], { prompt: 'Review the plan.', temperature: 0 }),
      },
    });
    const llm = scriptedLlm([reply('', [toolCall('call_1', 'search')]), reply('the plan'), reply('reviewed plan')]);
    const tools = echoTools();
    const machine = createSessionMachine(graph).provide({ actors: { callLlm: llm.logic, runTools: tools.logic } });
    const actor = createActor(machine, { input: { sessionId: 's2', maxToolRounds: 4, maxHandoffs: 5 } });
    let completedTurns = 0;
    actor.on('turn.completed', () => completedTurns++);
    actor.start();
    expect(actor.getSnapshot().value).to.equal('ask_user');
    expect(completedTurns).to.equal(0);

    const reasons: string[] = [];
    actor.subscribe((snapshot) => reasons.push(`${String(snapshot.value)}:${snapshot.context.reason}`));
    actor.send({ type: 'user.message', messages: USER_HI });
    const snapshot = await waitFor(actor, (s) => s.matches('ask_user'));

    expect(reasons).to.deep.equal([
      'planner:user_message',
      'planner_tools:tool_calls',
      'planner:tool_results',
      'reviewer:handoff',
      'ask_user:reply',
    ]);
    expect(completedTurns).to.equal(1);
    expect(llm.calls.map((call) => [call.state, call.stateConfig.prompt])).to.deep.equal([
      ['planner', 'Make a plan.'],
      ['planner', 'Make a plan.'],
      ['reviewer', 'Review the plan.'],
    ]);
    expect(tools.calls[0]!.stateConfig.tools).to.equal(undefined);
    expect(llm.calls[2]!.messages.at(-1)).to.deep.equal({ role: 'assistant', content: 'the plan' });
    expect(snapshot.context.reply?.content).to.equal('reviewed plan');
    expect(snapshot.context.transitions).to.equal(5);
  });

  it('continues from a restored snapshot without re-running an actor when the next user message arrives', async () => {
    const llm = scriptedLlm([reply('first'), reply('second')]);
    const machine = createSessionMachine(DEFAULT_GRAPH).provide({ actors: { callLlm: llm.logic } });
    const { actor } = await runFirstTurn(machine);
    // Through JSON, as the store keeps it.
    const persisted: unknown = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
    actor.stop();

    // The input is required by the machine's type and ignored when a snapshot is given.
    const restored = createActor(machine, {
      snapshot: persisted as ReturnType<typeof actor.getPersistedSnapshot>,
      input: { sessionId: 'ignored', maxToolRounds: 4, maxHandoffs: 5 },
    });
    restored.start();
    expect(restored.getSnapshot().value).to.equal('ask_user');
    expect(restored.getSnapshot().context).to.deep.include({ sessionId: 's1', transitions: 1, reason: 'reply' });
    expect(llm.calls).to.have.length(1);

    const completed = nextTurnCompleted(restored);
    restored.send({ type: 'user.message', messages: [...USER_HI, { role: 'assistant', content: 'first' }, { role: 'user', content: 'more' }] });
    await completed;
    expect(llm.calls).to.have.length(2);
    expect(restored.getSnapshot().context).to.deep.include({ transitions: 3, reason: 'reply' });
    expect(restored.getSnapshot().context.reply?.content).to.equal('second');
  });

  it('names the machine session and each state node after its graph state when generated', () => {
    const machine = createSessionMachine(DEFAULT_GRAPH);
    expect(machine.id).to.equal('session');
    for (const name of Object.keys(DEFAULT_GRAPH.states)) expect(machine.getStateNodeById(name).key).to.equal(name);
  });

  it('throws with every problem listed when the graph is invalid', () => {
    const bad = { ...DEFAULT_GRAPH, initial: 'nowhere' };
    expect(() => createSessionMachine(bad)).to.throw(/invalid state graph:\n\s+initial\s+initial state `nowhere`/);
  });
});

const TRIAGE_GRAPH = parse({
  initial: 'ask_user',
  states: {
    ask_user: state('user', ['triage']),
    triage: state('agent', ['ask_user', 'billing', 'support']),
    billing: state('agent', ['ask_user', 'billing_tools'], { description: 'Answers questions about invoices and payments.', prompt: 'You are billing.' }),
    billing_tools: state('tool', ['billing'], { require_approval: ['payments__refund'] }),
    support: state('agent', ['ask_user'], { description: 'Fixes technical problems.' }),
  },
});

const PLAN_GRAPH = parse({
  initial: 'ask_user',
  states: {
    ask_user: state('user', ['plan']),
    plan: state('agent', ['answer']),
    answer: state('agent', ['ask_user']),
  },
});

/** A reply that calls `transfer_to_<target>` (with arguments the model made up, which are ignored). */
function transfer(target: string, id = `call_${target}`, content = ''): AgentReply {
  const call = toolCall(id, `transfer_to_${target}`, '{"reason":"made up"}');
  return { ...reply(content, [call]), handoff: { state: target, call } };
}

/** Sends one user message to an actor at rest and waits for the turn to end. */
async function runTurn(actor: SessionActor, text: string) {
  const completed = nextTurnCompleted(actor);
  actor.send({ type: 'user.message', messages: [{ role: 'user', content: text }] });
  await completed;
  return actor.getSnapshot();
}

describe('createSessionMachine hand-offs', () => {
  function startAtRest(graph: StateGraph, llm: ReturnType<typeof scriptedLlm>, maxHandoffs = 5) {
    const machine = createSessionMachine(graph).provide({ actors: { callLlm: llm.logic, runTools: echoTools().logic } });
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, maxHandoffs } });
    const reasons: string[] = [];
    actor.subscribe((snapshot) => {
      if (snapshot.context.transitions > reasons.length) reasons.push(`${snapshot.context.reason}>${String(snapshot.value)}`);
    });
    actor.start();
    return { actor, reasons };
  }

  it('offers a transfer_to_ tool per agent successor, described by the target state, when a state also has a user successor', async () => {
    const llm = scriptedLlm([reply('which one?')]);
    const { actor } = startAtRest(TRIAGE_GRAPH, llm);
    await runTurn(actor, 'hello');
    expect(llm.calls[0]!.handoffs).to.deep.equal([
      { state: 'billing', tool: 'transfer_to_billing', description: 'Answers questions about invoices and payments.' },
      { state: 'support', tool: 'transfer_to_support', description: 'Fixes technical problems.' },
    ]);
    expect(llm.calls[0]!.output).to.equal('hidden_on_handoff');
    expect(llm.calls[0]!.toolApproval).to.equal(false);
  });

  it('goes to the chosen state with reason handoff, and the next call runs there with the transfer and its result in context', async () => {
    const llm = scriptedLlm([transfer('billing'), reply('your invoice is paid')]);
    const { actor, reasons } = startAtRest(TRIAGE_GRAPH, llm);
    const snapshot = await runTurn(actor, 'about my invoice');

    expect(reasons).to.deep.equal(['user_message>triage', 'handoff>billing', 'reply>ask_user']);
    expect(llm.calls[1]!.state).to.equal('billing');
    expect(llm.calls[1]!.stateConfig.prompt).to.equal('You are billing.');
    expect(llm.calls[1]!.handoffs).to.deep.equal([]);
    expect(llm.calls[1]!.output).to.equal('shown');
    expect(llm.calls[1]!.toolApproval).to.deep.equal(['payments__refund']);
    const transferCall = toolCall('call_billing', 'transfer_to_billing', '{"reason":"made up"}');
    expect(llm.calls[1]!.messages.slice(-2)).to.deep.equal([
      { role: 'assistant', content: '', tool_calls: [transferCall] },
      { role: 'tool', tool_call_id: 'call_billing', content: '{"assistant":"billing"}' },
    ]);
    expect(snapshot.context).to.deep.include({ handoffs: 1, reason: 'reply' });
  });

  it('sends a reply without a transfer call to the user state, as without hand-offs', async () => {
    const llm = scriptedLlm([reply('hello there')]);
    const { actor, reasons } = startAtRest(TRIAGE_GRAPH, llm);
    await runTurn(actor, 'hi');
    expect(reasons).to.deep.equal(['user_message>triage', 'reply>ask_user']);
  });

  it('offers no hand-off once the turn made max_handoffs, so the state answers itself; the next turn may hand off again', async () => {
    const graph = parse({
      initial: 'ask_user',
      states: {
        ask_user: state('user', ['first']),
        first: state('agent', ['ask_user', 'second']),
        second: state('agent', ['ask_user', 'first']),
      },
    });
    const llm = scriptedLlm([transfer('second'), transfer('first', 'call_back'), reply('first answers'), transfer('second', 'call_again'), reply('second answers')]);
    const { actor, reasons } = startAtRest(graph, llm, 2);
    await runTurn(actor, 'ping-pong');
    expect(reasons).to.deep.equal(['user_message>first', 'handoff>second', 'handoff>first', 'reply>ask_user']);
    expect(llm.calls.map((call) => call.handoffs.map((handoff) => handoff.state))).to.deep.equal([['second'], ['first'], []]);

    await runTurn(actor, 'again');
    expect(llm.calls[3]!.handoffs.map((handoff) => handoff.state)).to.deep.equal(['second']);
    expect(reasons.slice(4)).to.deep.equal(['user_message>first', 'handoff>second', 'reply>ask_user']);
  });

  it('marks a state that always hands over as hidden (a private step) unless it sets show_output', async () => {
    const llm = scriptedLlm([reply('the plan'), reply('the answer')]);
    const { actor, reasons } = startAtRest(PLAN_GRAPH, llm);
    await runTurn(actor, 'question');
    expect(reasons).to.deep.equal(['user_message>plan', 'handoff>answer', 'reply>ask_user']);
    expect(llm.calls.map((call) => call.output)).to.deep.equal(['hidden', 'shown']);
    expect(llm.calls[1]!.messages.at(-1)).to.deep.equal({ role: 'assistant', content: 'the plan' });

    const shown = parse({ ...PLAN_GRAPH, states: { ...PLAN_GRAPH.states, plan: state('agent', ['answer'], { show_output: true }) } });
    const shownLlm = scriptedLlm([reply('the plan'), reply('the answer')]);
    await runTurn(startAtRest(shown, shownLlm).actor, 'question');
    expect(shownLlm.calls[0]!.output).to.equal('shown');
  });

  it('gives the tool state\'s require_approval to the agent state whose calls run there', async () => {
    const graph = parse({
      initial: 'agent_reply',
      states: {
        ask_user: state('user', ['agent_reply']),
        agent_reply: state('agent', ['ask_user', 'use_tool']),
        use_tool: state('tool', ['agent_reply'], { require_approval: true }),
      },
    });
    const llm = scriptedLlm([reply('hi')]);
    await runFirstTurn(createSessionMachine(graph).provide({ actors: { callLlm: llm.logic } }));
    expect(llm.calls[0]!.toolApproval).to.equal(true);
  });

  it('resumes the agent state a turn names in resumeAt (its calls were approved), with reason approval, and the user state\'s successor otherwise', async () => {
    const llm = scriptedLlm([reply('billing goes on'), reply('triage answers')]);
    const { actor, reasons } = startAtRest(TRIAGE_GRAPH, llm);
    let completed = nextTurnCompleted(actor);
    actor.send({ type: 'user.message', messages: [{ role: 'user', content: 'yes' }], resumeAt: 'billing' });
    await completed;
    completed = nextTurnCompleted(actor);
    actor.send({ type: 'user.message', messages: [{ role: 'user', content: 'hi' }], resumeAt: 'no_such_state' });
    await completed;
    expect(reasons).to.deep.equal(['approval>billing', 'reply>ask_user', 'user_message>triage', 'reply>ask_user']);
    expect(llm.calls.map((call) => call.state)).to.deep.equal(['billing', 'triage']);
  });

  it('builds only the states a path from the initial state reaches', () => {
    const graph = parse({ ...DEFAULT_GRAPH, states: { ...DEFAULT_GRAPH.states, spare: state('agent', ['ask_user']) } });
    const machine = createSessionMachine(graph);
    expect(Object.keys(machine.states).sort()).to.deep.equal(['agent_reply', 'ask_user', 'use_tool']);
  });

  it('applies the limits it is given to an actor restored from a snapshot without hand-off counts', async () => {
    const llm = scriptedLlm([transfer('billing'), reply('paid')]);
    const machine = createSessionMachine(TRIAGE_GRAPH).provide({ actors: { callLlm: llm.logic } });
    const old = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, maxHandoffs: 5 } });
    old.start();
    const persisted = old.getPersistedSnapshot() as unknown as { context: Record<string, unknown> };
    const { handoffs: _count, maxHandoffs: _limit, ...olderContext } = persisted.context;
    const restored = createActor(machine, {
      snapshot: { ...persisted, context: { ...olderContext, maxHandoffs: 3 } } as never,
      input: { sessionId: 's1', maxToolRounds: 4, maxHandoffs: 3 },
    });
    restored.start();
    const snapshot = await runTurn(restored, 'invoice');
    expect(llm.calls[0]!.handoffs).to.have.length(2);
    expect(snapshot.context.handoffs).to.equal(1);
  });
});

describe('isRestingState', () => {
  it('is true only for user-type states when given a state value', () => {
    expect(isRestingState(DEFAULT_GRAPH, 'ask_user')).to.equal(true);
    expect(isRestingState(DEFAULT_GRAPH, 'agent_reply')).to.equal(false);
    expect(isRestingState(DEFAULT_GRAPH, 'use_tool')).to.equal(false);
    expect(isRestingState(DEFAULT_GRAPH, 'constructor')).to.equal(false);
  });
});

describe('stateTypeOf', () => {
  it('gives the type of a state and undefined when the graph has no such state', () => {
    expect(stateTypeOf(DEFAULT_GRAPH, 'use_tool')).to.equal('tool');
    expect(stateTypeOf(DEFAULT_GRAPH, 'missing')).to.equal(undefined);
  });
});
