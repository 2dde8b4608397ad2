import type { RequestHandler } from 'express';
import { AggregatorRegistry } from 'prom-client';
import type { ServiceMetrics } from '../../runtime/observability/metrics.js';
import { ServiceError } from '../../runtime/service-error.js';
import { callPrimary, isClusterWorker, type RpcHandler } from '../server/cluster-rpc.js';

const COLLECT_METHOD = 'metrics.collect';
/** The primary waits 5 s for the workers (prom-client's limit): a little longer here lets its own error come through. */
const PRIMARY_TIMEOUT_MS = 6_000;

// prom-client answers the primary's requests in a worker once an AggregatorRegistry exists
// there. Made at start-up, a worker still starting answers with no metrics (the unused global
// registry) instead of leaving the primary to wait out its time-out.
if (isClusterWorker()) new AggregatorRegistry();

/**
 * `GET /metrics` in the Prometheus text format. In a cluster worker it answers for the whole
 * instance: the primary gathers every worker's metrics (`metricsHandlers`) and sums them. Who
 * may read it is decided before: with API keys, the metrics token or an admin key
 * (gateway/http/api-keys.ts); without, clients on this machine (gateway/http/loopback-only.ts).
 */
export function createMetricsRoute(metrics: ServiceMetrics): RequestHandler {
  const contentType = metrics.registry.contentType;
  if (!isClusterWorker()) {
    return async (_req, res) => {
      res.set('Content-Type', contentType).send(await metrics.registry.metrics());
    };
  }
  // What the primary's requests read in this worker: the service's own registry, not the global one.
  AggregatorRegistry.setRegistries([metrics.registry]);
  return async (_req, res) => {
    let text: string;
    try {
      text = await callPrimary<string>(COLLECT_METHOD, null, PRIMARY_TIMEOUT_MS);
    } catch (error) {
      throw new ServiceError('UPSTREAM_UNAVAILABLE', `The metrics of the cluster's workers could not be gathered: ${(error as Error).message}`, { cause: error });
    }
    res.set('Content-Type', contentType).send(text);
  };
}

/** The primary's side of /metrics, for `servePrimary`: every worker's metrics, aggregated by prom-client. */
export function metricsHandlers(): Record<string, RpcHandler> {
  const aggregator = new AggregatorRegistry();
  return { [COLLECT_METHOD]: () => aggregator.clusterMetrics() };
}
