import type { CpuUsage } from './cpu-usage.js';
import type { Target } from './options.js';

/** Cores of the process under test during a cell (the LLM itself for direct). */
export function targetCores(cell: { target: Target; cpu: CpuUsage }): number {
  const { bench: _bench, 'fake LLM': llm = 0, postgres: _postgres, ...rest } = cell.cpu.byProcess;
  return cell.target === 'direct' ? llm : Object.values(rest).reduce((sum, used) => sum + used, 0);
}

/** CPU milliseconds a request of `cores` used during the cell (or one of its rounds). */
export const cpuPerRequestMs = (cell: { result: { rps: number } }, cores: number) => (cell.result.rps > 0 ? (1000 * cores) / cell.result.rps : Number.POSITIVE_INFINITY);

/** The service's CPU milliseconds a turn in a cell of the service (or one of its rounds). */
export const serviceCpuMs = (cell: { target: Target; result: { rps: number }; cpu: CpuUsage }) => cpuPerRequestMs(cell, targetCores(cell));
