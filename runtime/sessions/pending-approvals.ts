import type { ApprovalDecision, ApprovalRequest } from '../tools/tool-approvals.js';

/**
 * The approval requests a session waits on, kept in its stored snapshot at rest (beside
 * `unanswered`), so that they survive an eviction or a restart and the agent endpoints and
 * the inspector can show them. Stored snapshots are read defensively: anything malformed is
 * left out.
 */
export function pendingApprovalsOf(snapshot: unknown): ApprovalRequest[] {
  const pending = (snapshot as { pendingApprovals?: unknown } | null)?.pendingApprovals;
  return Array.isArray(pending) ? pending.filter(isApprovalRequest) : [];
}

/** A stored snapshot with the approval requests it waits on (none: the field is left out). */
export function withPendingApprovals(snapshot: unknown, pending: readonly ApprovalRequest[]): unknown {
  const { pendingApprovals: _answered, ...rest } = (snapshot ?? {}) as Record<string, unknown>;
  return pending.length > 0 ? { ...rest, pendingApprovals: pending } : rest;
}

function isApprovalRequest(value: unknown): value is ApprovalRequest {
  const request = value as Partial<ApprovalRequest> | null;
  const call = request?.call;
  return (
    typeof request?.id === 'string' &&
    typeof request.server === 'string' &&
    typeof request.tool === 'string' &&
    typeof call?.id === 'string' &&
    typeof call.function?.name === 'string' &&
    typeof call.function.arguments === 'string'
  );
}

/**
 * Approval requests a turn decided and had not finished carrying out: stored with the turn's
 * first write and cleared by its end, so a session that still holds them had its process die
 * in between. `goesOn`: the user's message went on into the context after the calls' results.
 */
export type DecidedApprovals = { decisions: ApprovalDecision[]; goesOn: boolean };

/** The decided approvals a stored snapshot holds, if its turn did not end (see `DecidedApprovals`). */
export function decidedApprovalsOf(snapshot: unknown): DecidedApprovals | undefined {
  const decided = (snapshot as { decidedApprovals?: Partial<DecidedApprovals> } | null)?.decidedApprovals;
  if (!decided || !Array.isArray(decided.decisions)) return undefined;
  const decisions = decided.decisions.filter((decision: Partial<ApprovalDecision> | null) => typeof decision?.approve === 'boolean' && isApprovalRequest(decision.request));
  return decisions.length > 0 ? { decisions, goesOn: decided.goesOn === true } : undefined;
}

/** A stored snapshot with the approvals its turn decided (none: the field is left out). */
export function withDecidedApprovals(snapshot: unknown, decided: DecidedApprovals | undefined): unknown {
  const { decidedApprovals: _carriedOut, ...rest } = (snapshot ?? {}) as Record<string, unknown>;
  return decided && decided.decisions.length > 0 ? { ...rest, decidedApprovals: decided } : rest;
}
