import { lazyModule } from '../../runtime/lazy-module.js';

/** What the A2A server uses of `@a2a-js/sdk` (its types, errors and Express handlers), loaded at the first A2A request. */
export const a2aSdk = lazyModule(async () => {
  const [types, errors, express, legacyExpress] = await Promise.all([
    import('@a2a-js/sdk'),
    import('@a2a-js/sdk/errors'),
    import('@a2a-js/sdk/server/express'),
    import('@a2a-js/sdk/compat/v0_3/server/express'),
  ]);
  return {
    Role: types.Role,
    TaskState: types.TaskState,
    AgentCard: types.AgentCard,
    A2A_VERSION_HEADER: types.A2A_VERSION_HEADER,
    errors,
    jsonRpcHandler: express.jsonRpcHandler,
    legacyAgentCardRouter: legacyExpress.legacyAgentCardRouter,
  };
});

/** `@a2a-js/sdk`, loaded. */
export type A2ASdk = Awaited<ReturnType<typeof a2aSdk.load>>;
