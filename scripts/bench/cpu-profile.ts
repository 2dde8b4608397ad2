import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Api } from './options.js';

type CallFrame = { functionName: string; url: string; lineNumber: number; columnNumber: number };
type ProfileNode = { id: number; callFrame: CallFrame };
/** The parts of a V8 `.cpuprofile` that self time needs. */
type CpuProfile = { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] };

/** One line of a self-time ranking. */
export type SelfTimeEntry = { name: string; where: string; ms: number; percent: number };

/** Self time of a profile: the top functions and the top packages/files, over the chosen window. */
export type SelfTimeReport = {
  file: string;
  /** Sampled time in the window, idle included, in ms. */
  totalMs: number;
  idleMs: number;
  /** Whether samples were cut to the measured window (false: the whole profile, start-up included). */
  windowed: boolean;
  /** Percent of the busy (non-idle) time. */
  functions: SelfTimeEntry[];
  modules: SelfTimeEntry[];
  /** The API of the cells whose windows were ranked, when the process served several. */
  api?: Api;
  /** Requests answered in the ranked windows: self time divided by it is CPU time a turn. */
  turns?: number;
};

/** One function's or package's self time a turn in two profiles of one thread, in µs. */
export type SelfTimeDelta = { name: string; where: string; baseUs: number; otherUs: number };

/** Where a thread spends its CPU a turn in one set of cells (base) against another (other). */
export type SelfTimeComparison = {
  file: string;
  base: { api?: Api; turns: number; busyUsPerTurn: number };
  other: { api?: Api; turns: number; busyUsPerTurn: number };
  /** The functions whose self time a turn grew most from base to other (most negative last). */
  functions: SelfTimeDelta[];
  modules: SelfTimeDelta[];
};

/**
 * Reads the `.cpuprofile` files in `dir` and ranks self time: each sample's node is charged
 * the interval up to the next sample, grouped by function name + url:line:column (tsx emits
 * each file on one line, so the column tells functions apart), and by package or project
 * file. Samples outside `windowsUs` (monotonic µs) are left out when they overlap the profile.
 */
export async function readSelfTime(dir: string, root: string, windowsUs: [number, number][], limit = 25): Promise<SelfTimeReport[]> {
  const files = (await readdir(dir)).filter((name) => name.endsWith('.cpuprofile'));
  const reports: SelfTimeReport[] = [];
  for (const file of files) {
    const profile = JSON.parse(await readFile(join(dir, file), 'utf8')) as CpuProfile;
    reports.push(rankSelfTime(profile, join(dir, file), root, windowsUs, limit));
  }
  return reports;
}

function rankSelfTime(profile: CpuProfile, file: string, root: string, windowsUs: [number, number][], limit: number): SelfTimeReport {
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const windowed = windowsUs.some(([from, to]) => from < profile.endTime && to > profile.startTime);
  const inWindow = (at: number) => !windowed || windowsUs.some(([from, to]) => at >= from && at < to);
  const byFunction = new Map<string, { name: string; where: string; us: number }>();
  const byModule = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  let at = profile.startTime;
  for (let index = 0; index < profile.samples.length; index += 1) {
    at += profile.timeDeltas[index] ?? 0;
    const us = profile.timeDeltas[index + 1] ?? 0;
    if (!inWindow(at)) continue;
    const frame = frames.get(profile.samples[index]!)!;
    totalUs += us;
    if (frame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const where = frame.url ? `${shortUrl(frame.url, root)}:${frame.lineNumber + 1}:${frame.columnNumber + 1}` : '';
    const key = `${frame.functionName}|${where}`;
    const entry = byFunction.get(key) ?? { name: frame.functionName || '(anonymous)', where, us: 0 };
    entry.us += us;
    byFunction.set(key, entry);
    const module = moduleOf(frame, root);
    byModule.set(module, (byModule.get(module) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const entry = (name: string, where: string, us: number): SelfTimeEntry => ({ name, where, ms: us / 1000, percent: (100 * us) / busyUs });
  return {
    file,
    totalMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    windowed,
    functions: [...byFunction.values()].sort((a, b) => b.us - a.us).slice(0, limit).map((e) => entry(e.name, e.where, e.us)),
    modules: [...byModule.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit).map(([name, us]) => entry(name, '', us)),
  };
}

function shortUrl(url: string, root: string): string {
  const prefix = `file://${root}/`;
  return url.startsWith(prefix) ? url.slice(prefix.length) : url;
}

/** The npm package, project file, `node:` internals or V8 pseudo-function a frame belongs to. */
function moduleOf(frame: CallFrame, root: string): string {
  if (!frame.url) return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const path = shortUrl(frame.url, root);
  const packaged = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (packaged) return packaged[1]!;
  if (path.startsWith('node:')) return path.split('/').slice(0, 2).join('/');
  return path;
}

/**
 * Compares two rankings of one thread (e.g. chat cells against Responses API cells) per turn:
 * the `limit` functions and packages whose self time a turn differs most, largest growth
 * first. The rankings should be complete (read with an unbounded `limit`), or an entry
 * missing from one side counts as zero there.
 */
export function compareSelfTime(base: SelfTimeReport, other: SelfTimeReport, limit: number): SelfTimeComparison {
  const baseTurns = base.turns ?? 0;
  const otherTurns = other.turns ?? 0;
  const perTurn = (ms: number, turns: number) => (turns > 0 ? (1000 * ms) / turns : 0);
  const deltas = (a: SelfTimeEntry[], b: SelfTimeEntry[]): SelfTimeDelta[] => {
    const byKey = new Map<string, SelfTimeDelta>();
    const entry = (e: SelfTimeEntry) => byKey.get(`${e.name}|${e.where}`) ?? { name: e.name, where: e.where, baseUs: 0, otherUs: 0 };
    for (const e of a) byKey.set(`${e.name}|${e.where}`, { ...entry(e), baseUs: perTurn(e.ms, baseTurns) });
    for (const e of b) byKey.set(`${e.name}|${e.where}`, { ...entry(e), otherUs: perTurn(e.ms, otherTurns) });
    const ranked = [...byKey.values()].sort((x, y) => y.otherUs - y.baseUs - (x.otherUs - x.baseUs));
    const grown = ranked.slice(0, limit - Math.floor(limit / 5));
    const shrunk = ranked.slice(grown.length).slice(-Math.floor(limit / 5));
    return [...grown, ...shrunk];
  };
  const side = (report: SelfTimeReport, turns: number) => ({ ...(report.api ? { api: report.api } : {}), turns, busyUsPerTurn: perTurn(report.totalMs - report.idleMs, turns) });
  return {
    file: other.file,
    base: side(base, baseTurns),
    other: side(other, otherTurns),
    functions: deltas(base.functions, other.functions),
    modules: deltas(base.modules, other.modules),
  };
}
