import { readdirSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import { parseGraphText } from '../../../machines/index.js';
import { startTestService } from '../../support/service-harness.js';

const EXAMPLES = new URL('../../../config/examples/', import.meta.url);
const FILES = readdirSync(EXAMPLES).filter((name) => name.endsWith('.yaml')).sort();

// docs/graph.md's worked examples: each file must stay valid and run a turn end to end.
describe('the example graphs under config/examples', () => {
  it('ships the three worked examples of docs/graph.md', () => {
    expect(FILES).to.deep.equal(['default.yaml', 'plan-then-answer.yaml', 'triage.yaml']);
  });

  for (const file of FILES) {
    it(`${file}: validates, and answers one turn with the reply alone`, async () => {
      const path = new URL(file, EXAMPLES).pathname;
      const validation = parseGraphText(readFileSync(path, 'utf8'), 'yaml');
      expect(validation, JSON.stringify(validation)).to.deep.include({ ok: true, warnings: [] });

      const harness = await startTestService({ env: { STATE_GRAPH_PATH: path } });
      try {
        // The message names billing, so the triage example hands over; the others just answer.
        const question = 'I have a billing question';
        const completion = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: question }] });
        expect(completion.choices[0]!.message.content).to.equal(`Echo: ${question}`);
        const calls = harness.llm.requests.filter((request) => request.kind === 'chat').length;
        expect(calls).to.equal(file === 'default.yaml' ? 1 : 2);
      } finally {
        await harness.close();
      }
    });
  }
});
