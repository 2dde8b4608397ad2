/** One sample of a Prometheus text exposition: `name{label="value",…} number`. */
export type PrometheusSample = { name: string; labels: Record<string, string>; value: number };

const SAMPLE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

/** Parses the samples of a Prometheus text exposition (comments and blank lines skipped). */
export function parsePrometheusText(text: string): PrometheusSample[] {
  const samples: PrometheusSample[] = [];
  for (const line of text.split('\n')) {
    const match = SAMPLE.exec(line);
    if (!match || line.startsWith('#')) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(LABEL)].map(([, key, value]) => [key!, value!]));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the sample `name` whose labels are exactly `labels`; undefined when there is none. */
export function sampleValue(samples: PrometheusSample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels);
  const sample = samples.find(
    (candidate) => candidate.name === name && Object.keys(candidate.labels).length === wanted.length && wanted.every(([key, value]) => candidate.labels[key] === value),
  );
  return sample?.value;
}
