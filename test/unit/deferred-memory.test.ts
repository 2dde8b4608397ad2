import { expect } from 'chai';
import { ConfigError } from '../../config/load-config.js';
import { createDeferredMemory } from '../../runtime/memory/deferred-memory.js';
import type { LongTermMemory } from '../../runtime/memory/long-term-memory.js';
import { ServiceError } from '../../runtime/service-error.js';

/** A memory that recalls `remembered` for anyone. */
function fixedMemory(remembered: string[]): LongTermMemory {
  return { ready: async () => {}, recall: async () => remembered, consolidate: async () => {} };
}

/** A choice the test settles, and how often it was asked for. */
function controlledChoice() {
  const settlers: Array<{ resolve(memory: LongTermMemory): void; reject(error: Error): void }> = [];
  return {
    settlers,
    choose: () => new Promise<LongTermMemory>((resolve, reject) => settlers.push({ resolve, reject })),
  };
}

async function failureOf(promise: Promise<unknown>): Promise<ServiceError> {
  return promise.then(
    () => {
      throw new Error('expected a failure');
    },
    (error: ServiceError) => error,
  );
}

describe('createDeferredMemory', () => {
  it('starts choosing at once, and recalls with the chosen memory once the choice is made', async () => {
    const choice = controlledChoice();
    const memory = createDeferredMemory(choice.choose);
    expect(choice.settlers).to.have.length(1);
    const recalled = memory.recall('ada', 'cats?');
    choice.settlers[0]!.resolve(fixedMemory(['the cat is Miso']));
    expect(await recalled).to.deep.equal(['the cat is Miso']);
    await memory.ready();
    expect(choice.settlers).to.have.length(1);
  });

  it('rejects ready() with MEMORY_UNAVAILABLE (Retry-After) when the choice failed, and chooses again at the next ready()', async () => {
    const choice = controlledChoice();
    const memory = createDeferredMemory(choice.choose);
    choice.settlers[0]!.reject(new Error('connection terminated'));
    const failure = await failureOf(memory.ready());
    expect(failure).to.be.instanceOf(ServiceError);
    expect(failure).to.include({ code: 'MEMORY_UNAVAILABLE', status: 503 });
    expect(failure.message).to.not.contain('connection terminated');
    expect(failure.headers).to.deep.equal({ 'Retry-After': '1' });

    const again = memory.ready();
    expect(choice.settlers).to.have.length(2);
    choice.settlers[1]!.resolve(fixedMemory(['likes tea']));
    await again;
    expect(await memory.recall('ada', 'tea?')).to.deep.equal(['likes tea']);
  });

  it('stays unavailable after a configuration error, saying what to change, without choosing again', async () => {
    const choice = controlledChoice();
    const memory = createDeferredMemory(choice.choose);
    choice.settlers[0]!.reject(new ConfigError('the long-term memories were embedded by the local embedder'));
    const first = await failureOf(memory.ready());
    const second = await failureOf(memory.ready());
    expect(second).to.equal(first);
    expect(first).to.include({ code: 'MEMORY_UNAVAILABLE' });
    expect(first.message).to.contain('embedded by the local embedder');
    expect(first.headers).to.deep.equal({});
    expect(choice.settlers).to.have.length(1);
    expect(await memory.recall('ada', 'anything')).to.deep.equal([]);
  });
});
