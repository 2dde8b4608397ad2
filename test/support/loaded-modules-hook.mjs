// Module customization hooks (module.register) that note the URL of every module loaded, one a
// line, in the file they are given: how lazy-loading-run.ts tells which packages a process loaded.
// Plain JavaScript: hooks run on a thread of their own, before any TypeScript loader applies.
import { appendFileSync } from 'node:fs';

let file;

export function initialize(data) {
  file = data.file;
}

export async function load(url, context, nextLoad) {
  appendFileSync(file, `${url}\n`);
  return nextLoad(url, context);
}
