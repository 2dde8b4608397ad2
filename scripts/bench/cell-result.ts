import type { CpuUsage } from './cpu-usage.js';
import type { LoadResult } from './load.js';
import type { Api, SessionMode, Target } from './options.js';
import type { SessionScenario } from './scenarios.js';

/** One measured cell: a target, an API (service only: chat or responses), a session mode (service only), streaming or not, a concurrency. */
export type CellResult = {
  target: Target;
  api: Api;
  mode: SessionMode | null;
  stream: boolean;
  connections: number;
  result: LoadResult;
  /** Cores used during the measured phase, by the bench, the processes under test and everything else. */
  cpu: CpuUsage;
  /** Some requests failed: the figures are suspect. */
  flagged: boolean;
  /** Other processes used the CPU meanwhile: the figures are low. */
  noisy: boolean;
  /** The service's worker processes (APP_WORKERS): set in the workers scenario's cells only. */
  workers?: number;
  /** With --rounds above 1: the cell in each start of the service, whose sum the cell is. */
  rounds?: RoundResult[];
  /** Set in the cells of the scenarios measured against the floor. */
  scenario?: SessionScenario;
};

/** A cell as one start of the service measured it. */
export type RoundResult = { rps: number; cpu: CpuUsage };
