/** Percentiles of a set of durations, in ms. */
export type LatencySummary = { p50: number; p95: number; p99: number; mean: number; max: number };

/** p50/p95/p99 (nearest rank), mean and max of `values`; NaN everywhere when there are none. */
export function summarise(values: number[]): LatencySummary {
  if (values.length === 0) return { p50: NaN, p95: NaN, p99: NaN, mean: NaN, max: NaN };
  const sorted = Float64Array.from(values).sort();
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  const sum = sorted.reduce((total, value) => total + value, 0);
  return { p50: rank(0.5), p95: rank(0.95), p99: rank(0.99), mean: sum / sorted.length, max: sorted[sorted.length - 1]! };
}

/** The middle of `values` (the mean of the two middle ones when their number is even); NaN when there are none. */
export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
