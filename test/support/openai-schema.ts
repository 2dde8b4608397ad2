import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { OPENAI_SCHEMAS_FILE, type OpenApiSchemas } from '../../scripts/openai-schema-refresh.js';
import { jsonSchemasOf } from './openapi-json-schema.js';

/** The trimmed copy of OpenAI's OpenAPI document (`npx tsx scripts/openai-schema-refresh.ts` writes it). */
const document = JSON.parse(readFileSync(OPENAI_SCHEMAS_FILE, 'utf8')) as OpenApiSchemas;

const DOCUMENT_ID = 'openai-openapi';

/**
 * Requirements of the document that no body can meet, set aside by schema: each names a
 * property its schema never defines (OpenAI's SDKs, generated from the document, leave them
 * out too). `test/unit/openai-schema.test.ts` checks that each is still there to set aside.
 */
export const UNDEFINED_REQUIREMENTS: Readonly<Record<string, readonly string[]>> = {
  // An approval response's id field is `approval_request_id`, which it also requires.
  MCPApprovalResponseResource: ['request_id'],
};

// Strict mode off: the document's own keywords (x-*, discriminator, example, deprecated…) are
// annotations. Formats (`unixtime`, …) are OpenAPI's and not checked.
const ajv = new Ajv2020({ strict: false, allErrors: true, verbose: true, validateFormats: false });
ajv.addSchema({ $id: DOCUMENT_ID, components: { schemas: jsonSchemasOf(withoutUndefinedRequirements(document.components.schemas)) } });

const validators = new Map<string, ValidateFunction>();

/** The version of OpenAI's OpenAPI document the bodies are checked against. */
export const OPENAI_SCHEMA_VERSION = document.info.version;

/**
 * What is wrong with `body` as an instance of the schema `name` of OpenAI's OpenAPI document,
 * one line per problem (`/choices/0/message must have required property 'refusal'`); empty
 * when it is valid.
 */
export function schemaProblems(name: string, body: unknown): string[] {
  const validate = validatorOf(name);
  if (validate(body)) return [];
  return [...new Set((validate.errors ?? []).filter((error) => error.keyword !== 'if').map(describe))];
}

/** Fails, listing every problem, unless `body` is a valid instance of OpenAI's schema `name`. */
export function expectSchema(name: string, body: unknown): void {
  const problems = schemaProblems(name, body);
  if (problems.length === 0) return;
  const shown = JSON.stringify(body);
  throw new Error(
    `not a valid ${name} of OpenAI's OpenAPI document ${OPENAI_SCHEMA_VERSION}:\n  ${problems.join('\n  ')}\nbody: ${shown.length > 2000 ? `${shown.slice(0, 2000)}…` : shown}`,
  );
}

function withoutUndefinedRequirements(schemas: Record<string, unknown>): Record<string, unknown> {
  const kept = { ...schemas };
  for (const [name, properties] of Object.entries(UNDEFINED_REQUIREMENTS)) {
    const schema = kept[name] as { required: string[] };
    kept[name] = { ...schema, required: schema.required.filter((property) => !properties.includes(property)) };
  }
  return kept;
}

function validatorOf(name: string): ValidateFunction {
  let validate = validators.get(name);
  if (!validate) {
    if (!Object.hasOwn(document.components.schemas, name)) throw new Error(`no schema '${name}' in ${OPENAI_SCHEMAS_FILE}: add it to OPENAI_SCHEMA_ROOTS and refresh`);
    validate = ajv.getSchema(`${DOCUMENT_ID}#/components/schemas/${name}`)!;
    validators.set(name, validate);
  }
  return validate;
}

/** One problem as a line: where in the body, what is wrong, and the value found when that helps. */
function describe(error: ErrorObject): string {
  const where = error.instancePath || '(the body)';
  const allowed = error.keyword === 'enum' ? ` (${listed((error.params as { allowedValues: unknown[] }).allowedValues)})` : '';
  const expected = error.keyword === 'const' ? ` ${JSON.stringify((error.params as { allowedValue: unknown }).allowedValue)}` : '';
  const found = ['type', 'enum', 'const'].includes(error.keyword) ? `, got ${truncated(JSON.stringify(error.data))}` : '';
  return `${where} ${error.message}${expected}${allowed}${found}`;
}

/** Allowed values, the first few of a long list. */
function listed(values: unknown[]): string {
  const shown = values.slice(0, 8).map((value) => JSON.stringify(value)).join(', ');
  return values.length > 8 ? `${shown} and ${values.length - 8} more` : shown;
}

function truncated(text: string | undefined): string {
  if (text === undefined) return 'nothing';
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
