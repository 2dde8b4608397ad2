import type { ApprovalRequest } from '../tools/tool-approvals.js';

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
