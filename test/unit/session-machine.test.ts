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
async function runFirstTurn(machine: SessionMachine, maxToolRounds = 4, messages = USER_HI) {
  const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds, messages } });
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
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, messages: USER_HI } });
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
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, messages: USER_HI } });
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
    const actor = createActor(machine, { input: { sessionId: 's1', maxToolRounds: 4, messages: USER_HI } });
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
    const actor = createActor(machine, { input: { sessionId: 's2', maxToolRounds: 4 } });
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
      input: { sessionId: 'ignored', maxToolRounds: 4 },
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
