import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { OPENAI_SCHEMA_ROOTS, OPENAI_SCHEMAS_FILE, renderOpenAiSchemas, trimOpenApiSchemas, type OpenApiSchemas } from '../../scripts/openai-schema-refresh.js';
import { expectSchema, schemaProblems, UNDEFINED_REQUIREMENTS } from '../support/openai-schema.js';

/** A chat completion as OpenAI's schema wants it. */
function completion(message: Record<string, unknown>) {
  return { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message, logprobs: null, finish_reason: 'stop' }] };
}

describe('OpenAI schema copy (test/support/openai-schema)', () => {
  const committed = readFileSync(OPENAI_SCHEMAS_FILE, 'utf8');
  const copy = JSON.parse(committed) as OpenApiSchemas;

  it('is what the refresh script writes: the closure of its roots, every $ref resolving inside it', () => {
    expect(renderOpenAiSchemas(trimOpenApiSchemas(copy, OPENAI_SCHEMA_ROOTS, copy.info.commit))).to.equal(committed);
    expect(copy.info).to.include({ version: '2.3.0' });
  });

  it('refuses a document whose $ref leads outside its schemas', () => {
    const broken: OpenApiSchemas = { ...copy, components: { schemas: { A: { $ref: '#/components/schemas/B' } } } };
    expect(() => trimOpenApiSchemas(broken, ['A'], undefined)).to.throw("schema 'B' is not in the document's components.schemas");
  });

  it('sets aside only requirements the copy still has and never defines', () => {
    for (const [name, properties] of Object.entries(UNDEFINED_REQUIREMENTS)) {
      const schema = copy.components.schemas[name] as { required: string[]; properties: Record<string, unknown> };
      for (const property of properties) {
        expect(schema.required, name).to.include(property);
        expect(schema.properties, name).to.not.have.property(property);
      }
    }
  });

  it('lists each missing field and wrong type with its path', () => {
    expect(schemaProblems('CreateChatCompletionResponse', completion({ role: 'assistant', content: 'hi', refusal: null }))).to.deep.equal([]);
    expect(schemaProblems('CreateChatCompletionResponse', completion({ role: 'assistant', content: 7 }))).to.include.members([
      "/choices/0/message must have required property 'refusal'",
      '/choices/0/message/content must be string, got 7',
    ]);
  });

  it('reads OpenAPI 3.0 nullable as "or null"', () => {
    const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: null }] };
    expect(schemaProblems('CreateChatCompletionStreamResponse', chunk)).to.deep.equal([]);
    expect(schemaProblems('CreateChatCompletionStreamResponse', { ...chunk, choices: [{ ...chunk.choices[0], finish_reason: 'bored' }] })).to.not.deep.equal([]);
  });

  it('tells a member of a union what its own branch misses, by its type', () => {
    const problems = schemaProblems('ResponseStreamEvent', { type: 'response.mcp_call.completed', sequence_number: 3, item_id: 'mcp_1' });
    expect(problems).to.deep.equal(["(the body) must have required property 'output_index'"]);
    expect(schemaProblems('ResponseStreamEvent', { type: 'response.unheard_of', sequence_number: 0 })[0]).to.match(/^\/type must be equal to one of the allowed values/);
  });

  it('fails with the problems in its message', () => {
    expect(() => expectSchema('ErrorResponse', { error: { message: 'm', type: 't', param: null } })).to.throw(/ErrorResponse .*2\.3\.0:\n {2}\/error must have required property 'code'/);
  });
});
