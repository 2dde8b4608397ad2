import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** CPU used during a stretch of time, in cores (1 = one core busy all along): by each watched process, and by everything else. */
export type CpuUsage = { byProcess: Record<string, number>; foreign: number };

/** The processes whose CPU is ours (the bench and its children), by name. */
export type WatchedProcesses = () => Record<string, number>;

const TICKS_PER_SECOND = 100; // USER_HZ: the unit of /proc/stat and /proc/<pid>/stat on Linux

/** Starts counting CPU time (Linux /proc); `stop` returns the usage since. Elsewhere it reports zeros. */
export function watchCpu(watched: WatchedProcesses): { stop: () => CpuUsage } {
  const started = performance.now();
  const machineBefore = machineBusyTicks();
  const before = processTicks(watched());
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const after = processTicks(watched());
      const byProcess: Record<string, number> = {};
      let ours = 0;
      for (const [name, ticks] of Object.entries(after)) {
        const used = ticks - (before[name] ?? ticks);
        ours += used;
        byProcess[name] = used / TICKS_PER_SECOND / seconds;
      }
      const foreign = Math.max(0, machineBusyTicks() - machineBefore - ours) / TICKS_PER_SECOND / seconds;
      return { byProcess, foreign };
    },
  };
}

/**
 * Waits until other processes use less than `maxForeign` cores over a `sampleMs` sample, at most
 * `maxWaitMs`; resolves with the last sample's foreign usage.
 */
export async function waitForQuiet(watched: WatchedProcesses, maxForeign: number, maxWaitMs: number, sampleMs = 1_000): Promise<number> {
  const deadline = performance.now() + maxWaitMs;
  for (;;) {
    const watch = watchCpu(watched);
    await sleep(sampleMs);
    const { foreign } = watch.stop();
    if (foreign < maxForeign || performance.now() >= deadline) return foreign;
  }
}

function machineBusyTicks(): number {
  try {
    // cpu  user nice system idle iowait irq softirq steal ...
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields as [number, number, number, number, number, number, number, number];
    return user + nice + system + irq + softirq + steal;
  } catch {
    return 0;
  }
}

function processTicks(pids: Record<string, number>): Record<string, number> {
  const ticks: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      // The fields after the command name, which may hold spaces and parentheses: utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks[name] = Number(fields[11]) + Number(fields[12]);
    } catch {
      // Gone, or not Linux.
    }
  }
  return ticks;
}
