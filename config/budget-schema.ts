import { z } from 'zod';

/** The token budgets a user may have; 0 is no limit. */
export const BUDGET_NAMES = ['tokens_per_day', 'tokens_per_month', 'tokens_per_turn'] as const;

/** One of the budgets. */
export type BudgetName = (typeof BUDGET_NAMES)[number];

/** A user's budgets: input and output tokens of the LLM calls of a UTC day, a UTC calendar month and one turn; 0 is no limit. */
export type BudgetLimits = Record<BudgetName, number>;

/** The `budgets` settings: the default, and the users whose budgets differ (each key given replaces the default's). */
export type BudgetsConfig = { default: BudgetLimits; users: Record<string, Partial<BudgetLimits>> };

/** The environment variables of the default budgets, which win over `budgets.default` in the deployment file. */
export const BUDGET_ENV: Record<BudgetName, string> = {
  tokens_per_day: 'BUDGETS_TOKENS_PER_DAY',
  tokens_per_month: 'BUDGETS_TOKENS_PER_MONTH',
  tokens_per_turn: 'BUDGETS_TOKENS_PER_TURN',
};

/** What each budget limits, for the configuration reference and .env.example. */
export const BUDGET_DOCS: Record<BudgetName, string> = {
  tokens_per_day:
    "Tokens (input and output, as /v1/usage counts them) a user's LLM calls may use in a day (UTC), across workers and instances. Past it a request is refused with 429 `insufficient_quota`, and a running turn calls the model no more.",
  tokens_per_month: "Tokens a user's LLM calls may use in a calendar month (UTC); refused as past `tokens_per_day`.",
  tokens_per_turn: 'Tokens one turn may use, all its LLM rounds and tool rounds together. A turn that reaches it calls the model no more and ends with what it has (`finish_reason: length`; in the Responses API `incomplete` with reason `max_output_tokens`).',
};

const tokens = z.number({ error: 'must be a whole number of tokens (0: no limit)' }).int('must be a whole number of tokens (0: no limit)').min(0, 'must be 0 (no limit) or more');

const LimitsSchema = z.strictObject({
  tokens_per_day: tokens.optional(),
  tokens_per_month: tokens.optional(),
  tokens_per_turn: tokens.optional(),
});

/** The `budgets` key of the deployment file. */
export const BudgetsSchema = z
  .strictObject({
    default: LimitsSchema.default({}),
    users: z.record(z.string().min(1, 'a user id must not be empty'), LimitsSchema).default({}),
  });

/** No budget at all: every limit 0. */
export const NO_BUDGETS: BudgetLimits = { tokens_per_day: 0, tokens_per_month: 0, tokens_per_turn: 0 };

/**
 * The `budgets` settings from the deployment file's value (validated: a message naming the bad
 * key, from `budgets.`) and the environment's default budgets, which win over the file's.
 */
export function budgetsOf(fileValue: unknown, env: NodeJS.ProcessEnv): { config: BudgetsConfig } | { error: string } {
  const parsed = BudgetsSchema.safeParse(fileValue);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { error: `${['budgets', ...issue.path].join('.')}: ${issue.message}` };
  }
  const defaults: BudgetLimits = { ...NO_BUDGETS, ...parsed.data.default };
  for (const name of BUDGET_NAMES) {
    const raw = env[BUDGET_ENV[name]];
    if (raw === undefined || raw === '') continue;
    if (!/^\d{1,15}$/.test(raw.trim())) return { error: `budgets.default.${name} (${BUDGET_ENV[name]}): must be a whole number of tokens (0: no limit), not "${raw}"` };
    defaults[name] = Number(raw.trim());
  }
  return { config: { default: defaults, users: parsed.data.users } };
}

/** Whether any budget is set, for anyone: without, budgets cost nothing on the turn path. */
export function hasBudgets(config: BudgetsConfig): boolean {
  const limits = [config.default, ...Object.values(config.users)];
  return limits.some((entry) => BUDGET_NAMES.some((name) => (entry[name] ?? 0) > 0));
}
