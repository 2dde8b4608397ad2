/** A schema of an OpenAPI 3.1 document as JSON. */
type SchemaNode = Record<string, unknown>;

/** Keywords whose value is a map of subschemas. */
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'dependentSchemas'];

/** Keywords whose value is a list of subschemas. */
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];

/** Keywords whose value is one subschema. */
const SCHEMA_SLOTS = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties'];

const SCHEMA_REF = '#/components/schemas/';

/**
 * The `components.schemas` of an OpenAPI 3.1 document as plain JSON Schema 2020-12, keyed as
 * before, meaning the same: OpenAPI 3.0's `nullable: true` (still in the document here and
 * there) becomes "or null"; `$recursiveRef: '#'` (draft 2019-09) becomes a `$ref` to the
 * schema that holds it; and a union with a `discriminator` becomes one `if`/`then` per value of
 * the discriminating property, so a body that fails is told what its own branch misses rather
 * than why every other branch does not fit. Other OpenAPI keywords are left for the validator
 * to ignore.
 */
export function jsonSchemasOf(schemas: Record<string, unknown>): Record<string, unknown> {
  const resolve = (node: unknown): SchemaNode | undefined => {
    const ref = isSchema(node) ? node.$ref : undefined;
    if (typeof ref !== 'string') return isSchema(node) ? node : undefined;
    return ref.startsWith(SCHEMA_REF) ? resolve(schemas[ref.slice(SCHEMA_REF.length)]) : undefined;
  };
  return Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [name, convert(schema, name, resolve)]));
}

function convert(node: unknown, owner: string, resolve: (node: unknown) => SchemaNode | undefined): unknown {
  if (!isSchema(node)) return node;
  const converted: SchemaNode = { ...node };
  for (const key of SCHEMA_MAPS) {
    const map = converted[key];
    if (isSchema(map)) converted[key] = Object.fromEntries(Object.entries(map).map(([name, child]) => [name, convert(child, owner, resolve)]));
  }
  for (const key of SCHEMA_LISTS) {
    const list = converted[key];
    if (Array.isArray(list)) converted[key] = list.map((child) => convert(child, owner, resolve));
  }
  for (const key of SCHEMA_SLOTS) {
    if (key in converted) converted[key] = convert(converted[key], owner, resolve);
  }
  if (converted.$recursiveRef === '#') {
    delete converted.$recursiveRef;
    converted.$ref = `${SCHEMA_REF}${owner}`;
  }
  delete converted.$recursiveAnchor;
  return orNull(discriminated(converted, resolve));
}

/** `nullable: true` as JSON Schema: the schema, or null. */
function orNull(node: SchemaNode): SchemaNode {
  if (!('nullable' in node)) return node;
  const { nullable, ...schema } = node;
  return nullable === true ? { anyOf: [{ type: 'null' }, schema] } : schema;
}

/**
 * A `oneOf`/`anyOf` with a `discriminator` as one `if`/`then` per value of its property: an
 * object whose property has that value must match that value's branches. Left as it is when a
 * branch does not fix the property to one or more values.
 */
function discriminated(node: SchemaNode, resolve: (node: unknown) => SchemaNode | undefined): SchemaNode {
  const property = isSchema(node.discriminator) ? node.discriminator.propertyName : undefined;
  const keyword = Array.isArray(node.oneOf) ? 'oneOf' : Array.isArray(node.anyOf) ? 'anyOf' : undefined;
  if (typeof property !== 'string' || !keyword) return node;
  const branches = node[keyword] as unknown[];
  const tags = branches.map((branch) => tagOf(branch, property, resolve));
  if (tags.some((tag) => tag === undefined)) return node;
  const values = [...new Set(tags.flatMap((tag) => tag!.values))];
  const union = (chosen: unknown[]) => (chosen.length === 1 ? chosen[0] : { [keyword]: chosen });
  const withValue = values.map((value) => ({
    if: { required: [property], properties: { [property]: { const: value } } },
    then: union(branches.filter((_, index) => tags[index]!.values.includes(value))),
  }));
  const untagged = branches.filter((_, index) => !tags[index]!.required);
  const { [keyword]: _union, discriminator: _discriminator, ...rest } = node;
  const anyValue = {
    if: { required: [property] },
    then: { properties: { [property]: { enum: values } } },
    else: untagged.length > 0 ? union(untagged) : { required: [property] },
  };
  return { ...rest, allOf: [...(Array.isArray(rest.allOf) ? rest.allOf : []), ...withValue, anyValue] };
}

/** The values a union branch allows its discriminating property, and whether it requires it; undefined when it does not fix them. */
function tagOf(branch: unknown, property: string, resolve: (node: unknown) => SchemaNode | undefined): { values: unknown[]; required: boolean } | undefined {
  const schema = resolve(branch);
  if (!schema) return undefined;
  const parts = [schema, ...(Array.isArray(schema.allOf) ? schema.allOf.map(resolve) : [])].filter((part) => part !== undefined);
  const required = parts.some((part) => Array.isArray(part.required) && part.required.includes(property));
  for (const part of parts) {
    const field = resolve(isSchema(part.properties) ? part.properties[property] : undefined);
    if (!field) continue;
    if ('const' in field) return { values: [field.const], required };
    if (Array.isArray(field.enum) && field.enum.length > 0) return { values: field.enum, required };
  }
  return undefined;
}

function isSchema(node: unknown): node is SchemaNode {
  return node !== null && typeof node === 'object' && !Array.isArray(node);
}
