import { Router } from 'express';
import { ServiceError } from '../runtime/service-error.js';

/** The announced routes not built yet: 501 in the OpenAI error shape. */
export function createAnnouncedRouter(): Router {
  const router = Router();
  const notImplemented = () => {
    throw new ServiceError('NOT_IMPLEMENTED', 'This endpoint is announced but not implemented yet.');
  };
  router.all('/v1/agents', notImplemented);
  router.all('/v1/agents/{*rest}', notImplemented);
  router.all('/v1/webhooks', notImplemented);
  router.all('/v1/webhooks/{*rest}', notImplemented);
  return router;
}
