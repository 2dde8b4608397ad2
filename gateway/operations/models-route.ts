import { Router } from 'express';
import { ServiceError } from '../../runtime/service-error.js';

/** The model identifiers the service answers to. */
export const SERVICE_MODELS = ['svc-agent', 'svc-default'] as const;

const CREATED = 1_735_689_600; // 2025-01-01, a fixed date so the list is stable

function modelObject(id: string) {
  return { id, object: 'model', created: CREATED, owned_by: 'svc' };
}

/** `GET /v1/models` and `GET /v1/models/{id}` in the OpenAI shapes, so front ends can discover the agent. */
export function createModelsRouter(): Router {
  const router = Router();
  router.get('/v1/models', (_req, res) => {
    res.json({ object: 'list', data: SERVICE_MODELS.map(modelObject) });
  });
  router.get('/v1/models/:id', (req, res) => {
    if (!(SERVICE_MODELS as readonly string[]).includes(req.params.id)) {
      throw new ServiceError('NOT_FOUND', `The model '${req.params.id}' does not exist`, { param: 'model' });
    }
    res.json(modelObject(req.params.id));
  });
  return router;
}
