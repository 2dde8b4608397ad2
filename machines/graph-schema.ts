import { z } from 'zod';

/** What a state name looks like: a snake_case identifier such as `agent_reply`. */
export const STATE_NAME_PATTERN = /^[a-z][a-z0-9_]*$/;

/** The kinds of state; the generator derives each state's behaviour from its kind. */
export const STATE_TYPES = ['user', 'agent', 'tool'] as const;

/** The kind of a state: `user` waits for input, `agent` calls the LLM, `tool` runs tool calls. */
export type StateType = (typeof STATE_TYPES)[number];

/** Schema of one state of the graph file: topology plus optional per-state extras. */
export const GraphStateSchema = z.strictObject({
  description: z.string(),
  type: z.enum(STATE_TYPES),
  transition: z.strictObject({ next: z.array(z.string()) }),
  /** Added to the system prompt while the session is in this state. */
  prompt: z.string().optional(),
  /** Names of the tools offered in this state; absent means every tool. */
  tools: z.array(z.string()).optional(),
  model: z.string().optional(),
  temperature: z.number().min(0).max(2).optional(),
  max_tokens: z.number().int().positive().optional(),
  /**
   * Agent states: whether the state's text reaches the reply even when it hands over to another
   * agent state (by default such a step is private: only the next states see it).
   */
  show_output: z.boolean().optional(),
  /**
   * Tool states: which calls wait for the user's approval before they run here: `true` (all),
   * `false` (none beyond the servers' own rules), or the names of the tools (as offered to the model).
   */
  require_approval: z.union([z.boolean(), z.array(z.string().min(1, 'a tool name must not be empty'))]).optional(),
});

/** One state of a parsed graph. */
export type GraphState = z.infer<typeof GraphStateSchema>;

const isPlainObject = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Schema of the state graph file (`initial` and `states.<name>`). */
export const StateGraphSchema = z.strictObject({
  initial: z.string(),
  states: z.record(z.string(), GraphStateSchema).superRefine(
    (states, ctx) => {
      for (const name of Object.keys(states)) {
        if (!STATE_NAME_PATTERN.test(name)) {
          ctx.addIssue({ code: 'custom', path: [name], message: `state name "${name}" is not snake_case (${STATE_NAME_PATTERN.source})` });
        }
      }
    },
    // Checked even when a state's body is invalid too, so both problems are listed at once.
    { when: (payload) => isPlainObject(payload.value) },
  ),
});

/** A parsed state graph. */
export type StateGraph = z.infer<typeof StateGraphSchema>;
