import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * CPU used during a stretch of time, in cores (1 = one core busy all along): by each watched
 * process group, by every other process, and taken by the hypervisor (steal).
 */
export type CpuUsage = { byProcess: Record<string, number>; foreign: number; steal: number };

/** The processes whose CPU is accounted for separately (the bench, its children, the PostgreSQL server), by name. */
export type WatchedProcesses = () => Record<string, number[]>;

const TICKS_PER_SECOND = 100; // USER_HZ: the unit of /proc/stat and /proc/<pid>/stat on Linux

/** Starts counting CPU time (Linux /proc); `stop` returns the usage since. Elsewhere it reports zeros. */
export function watchCpu(watched: WatchedProcesses): { stop: () => CpuUsage } {
  const started = performance.now();
  const machineBefore = machineTicks();
  const before = processTicks(Object.values(watched()).flat());
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const cores = (ticks: number) => ticks / TICKS_PER_SECOND / seconds;
      const groups = watched();
      const after = processTicks(Object.values(groups).flat());
      const byProcess: Record<string, number> = {};
      let ours = 0;
      for (const [name, pids] of Object.entries(groups)) {
        // A pid born during the stretch (a new PostgreSQL backend) counts from zero.
        const used = pids.reduce((sum, pid) => sum + (after.has(pid) ? after.get(pid)! - (before.get(pid) ?? 0) : 0), 0);
        ours += used;
        byProcess[name] = cores(used);
      }
      const machine = machineTicks();
      return { byProcess, foreign: cores(Math.max(0, machine.busy - machineBefore.busy - ours)), steal: cores(machine.steal - machineBefore.steal) };
    },
  };
}

/** The usage over several stretches as over one: each stretch's cores weighted by its length. */
export function averageCpu(stretches: Array<{ usage: CpuUsage; seconds: number }>): CpuUsage {
  const seconds = stretches.reduce((sum, stretch) => sum + stretch.seconds, 0);
  const mean = (coresOf: (usage: CpuUsage) => number) => stretches.reduce((sum, stretch) => sum + coresOf(stretch.usage) * stretch.seconds, 0) / seconds;
  const names = new Set(stretches.flatMap((stretch) => Object.keys(stretch.usage.byProcess)));
  const byProcess = Object.fromEntries([...names].map((name) => [name, mean((usage) => usage.byProcess[name] ?? 0)]));
  return { byProcess, foreign: mean((usage) => usage.foreign), steal: mean((usage) => usage.steal) };
}

/**
 * Waits until other processes and the hypervisor take less than `maxCores` over a `sampleMs`
 * sample, at most `maxWaitMs`; resolves with the last sample's foreign + steal.
 */
export async function waitForQuiet(watched: WatchedProcesses, maxCores: number, maxWaitMs: number, sampleMs = 1_000): Promise<number> {
  const deadline = performance.now() + maxWaitMs;
  for (;;) {
    const watch = watchCpu(watched);
    await sleep(sampleMs);
    const { foreign, steal } = watch.stop();
    if (foreign + steal < maxCores || performance.now() >= deadline) return foreign + steal;
  }
}

/** The pids of the PostgreSQL server's processes on this machine (postmaster and backends). */
export function postgresPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => readText(`/proc/${pid}/comm`)?.trim() === 'postgres')
      .map(Number);
  } catch {
    return [];
  }
}

/** The pids of a process group: a child started as group leader and the processes it forked (cluster workers). */
export function groupPids(pgid: number): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        const stat = readText(`/proc/${pid}/stat`);
        // After the command name: state, ppid, pgrp.
        return stat !== undefined && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid;
      })
      .map(Number);
  } catch {
    return [pgid];
  }
}

/** Busy ticks of processes (user, nice, system; interrupt time is left out: here it is mostly our loopback traffic) and steal. */
function machineTicks(): { busy: number; steal: number } {
  // cpu  user nice system idle iowait irq softirq steal ...
  const fields = (readText('/proc/stat') ?? '').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const [user = 0, nice = 0, system = 0, , , , , steal = 0] = fields;
  return { busy: user + nice + system, steal };
}

function processTicks(pids: number[]): Map<number, number> {
  const ticks = new Map<number, number>();
  for (const pid of pids) {
    const stat = readText(`/proc/${pid}/stat`);
    if (stat === undefined) continue;
    // The fields after the command name, which may hold spaces and parentheses: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks.set(pid, Number(fields[11]) + Number(fields[12]));
  }
  return ticks;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
