// `npx tsx scripts/openai-schema-refresh.ts <openapi.json> --commit <sha>`: writes
// test/support/openai-schema/openai-schemas.json, the part of OpenAI's OpenAPI document
// (github.com/openai/openai-openapi) that the service's responses are checked against: the
// schemas named in OPENAI_SCHEMA_ROOTS and every schema they reach through `$ref`, verbatim.
import { readFile, writeFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** The trimmed copy the end-to-end tests validate against. */
export const OPENAI_SCHEMAS_FILE = fileURLToPath(new URL('../test/support/openai-schema/openai-schemas.json', import.meta.url));

/** The schemas of every body the service answers with in OpenAI's shapes; the copy holds these and what they reference. */
export const OPENAI_SCHEMA_ROOTS = [
  'CreateChatCompletionResponse',
  'CreateChatCompletionStreamResponse',
  'ErrorResponse',
  'ListModelsResponse',
  'Model',
  'Response',
  'ResponseStreamEvent',
  'ResponseItemList',
  'ConversationResource',
  'ConversationItemList',
  'DeletedConversationResource',
] as const;

/** The part of an OpenAPI document this script reads and writes. */
export type OpenApiSchemas = {
  openapi: string;
  info: { title: string; version: string; commit?: string };
  components: { schemas: Record<string, unknown> };
};

const SCHEMA_REF = /^#\/components\/schemas\/([^/]+)$/;

/**
 * The document cut down to the closure of `roots` (every schema a `$ref` reaches, followed to
 * the end), sorted by name, with the document's version and the commit it came from. A `$ref`
 * to anything but a schema of the document throws: the copy would not be whole.
 */
export function trimOpenApiSchemas(document: OpenApiSchemas, roots: readonly string[], commit: string | undefined): OpenApiSchemas {
  const all = document.components.schemas;
  const kept = new Set<string>();
  const pending = [...roots];
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (kept.has(name)) continue;
    if (!Object.hasOwn(all, name)) throw new Error(`schema '${name}' is not in the document's components.schemas`);
    kept.add(name);
    pending.push(...referencedSchemas(all[name]));
  }
  const schemas = Object.fromEntries([...kept].sort().map((name) => [name, all[name]]));
  const info = { title: document.info.title, version: document.info.version, ...(commit ? { commit } : {}) };
  return { openapi: document.openapi, info, components: { schemas } };
}

/** The text of the copy as the script writes it. */
export function renderOpenAiSchemas(trimmed: OpenApiSchemas): string {
  return `${JSON.stringify(trimmed, null, 2)}\n`;
}

/** The names of the schemas a schema's `$ref`s point at. */
export function referencedSchemas(schema: unknown): string[] {
  if (Array.isArray(schema)) return schema.flatMap(referencedSchemas);
  if (schema === null || typeof schema !== 'object') return [];
  return Object.entries(schema).flatMap(([key, value]) => {
    if (key !== '$ref' || typeof value !== 'string') return referencedSchemas(value);
    const match = SCHEMA_REF.exec(value);
    if (!match) throw new Error(`$ref '${value}' does not name a schema of components.schemas`);
    return [match[1]!];
  });
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: { commit: { type: 'string' } }, allowPositionals: true });
  const [source] = positionals;
  if (positionals.length !== 1 || !source) {
    console.error('usage: npx tsx scripts/openai-schema-refresh.ts <openapi.json> --commit <sha of openai/openai-openapi>');
    return 2;
  }
  const document = JSON.parse(await readFile(source, 'utf8')) as OpenApiSchemas;
  const trimmed = trimOpenApiSchemas(document, OPENAI_SCHEMA_ROOTS, values.commit);
  await writeFile(OPENAI_SCHEMAS_FILE, renderOpenAiSchemas(trimmed));
  const count = Object.keys(trimmed.components.schemas).length;
  console.log(`wrote ${relative(process.cwd(), OPENAI_SCHEMAS_FILE)}: ${count} schemas of version ${trimmed.info.version}`);
  return 0;
}

// Run as a script, not when a test imports it.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
