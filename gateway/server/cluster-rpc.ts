import cluster, { type Worker } from 'node:cluster';
import { randomUUID } from 'node:crypto';

/**
 * Requests from a worker to the primary process over the cluster's IPC channel, for what
 * must be counted once per instance (rate limits, the aggregated /metrics). Messages are
 * tagged, so other users of the channel (prom-client's own) pass by untouched.
 */
const TAG = 'svc-agent-rpc';

type RpcRequest = { tag: typeof TAG; id: string; method: string; payload: unknown };
type RpcResponse = { tag: typeof TAG; id: string; result?: unknown; error?: string };

/** A method the primary answers; `worker` is the asking worker. */
export type RpcHandler = (payload: unknown, worker: Worker) => unknown | Promise<unknown>;

/** True in a worker process started by the cluster primary. */
export function isClusterWorker(): boolean {
  return cluster.isWorker && typeof process.send === 'function';
}

const pending = new Map<string, { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
let listening = false;

/** Asks the primary to run `method`; rejects after `timeoutMs` or when the channel is gone. */
export function callPrimary<T>(method: string, payload: unknown, timeoutMs = 5_000): Promise<T> {
  if (!isClusterWorker()) return Promise.reject(new Error('callPrimary needs a cluster worker'));
  if (!listening) {
    listening = true;
    process.on('message', (message: RpcResponse) => {
      if (message?.tag !== TAG) return;
      const call = pending.get(message.id);
      if (!call) return;
      pending.delete(message.id);
      clearTimeout(call.timer);
      if (message.error !== undefined) call.reject(new Error(message.error));
      else call.resolve(message.result);
    });
  }
  const id = randomUUID();
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error(`the primary process did not answer ${method} within ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
    const request: RpcRequest = { tag: TAG, id, method, payload };
    process.send!(request, undefined, undefined, (error) => {
      if (!error) return;
      pending.delete(id);
      clearTimeout(timer);
      reject(error);
    });
  });
}

/** Sends `method` to the primary without waiting for an answer (e.g. a release). */
export function notifyPrimary(method: string, payload: unknown): void {
  if (!isClusterWorker() || !process.connected) return;
  const request: RpcRequest = { tag: TAG, id: '', method, payload };
  process.send!(request, undefined, undefined, () => undefined);
}

/** In the primary: answers the workers' requests with `handlers`, for every worker forked from now on. */
export function servePrimary(handlers: Record<string, RpcHandler>): () => void {
  const onMessage = (worker: Worker, message: RpcRequest) => {
    if (message?.tag !== TAG) return;
    const handler = handlers[message.method];
    const reply = (response: Omit<RpcResponse, 'tag' | 'id'>) => {
      if (message.id === '' || !worker.isConnected()) return;
      worker.send({ tag: TAG, id: message.id, ...response } satisfies RpcResponse, undefined, () => undefined);
    };
    if (!handler) {
      reply({ error: `unknown method ${message.method}` });
      return;
    }
    Promise.resolve()
      .then(() => handler(message.payload, worker))
      .then(
        (result) => reply({ result }),
        (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) }),
      );
  };
  cluster.on('message', onMessage);
  return () => cluster.off('message', onMessage);
}
