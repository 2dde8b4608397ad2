import express, { Router, type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import type { User } from '@a2a-js/sdk/server';
import { isServiceError } from '../../runtime/service-error.js';
import { userOf } from '../http/acting-user.js';
import { holdToTextRules } from '../http/text-rules.js';
import { A2AHandler, type A2AHandlerDeps } from './a2a-request-handler.js';
import { a2aSdk } from './a2a-sdk.js';
import { agentCardOf, type AgentCardSource } from './agent-card.js';

/** What the A2A routes need. */
export type A2ARoutesDeps = Omit<A2AHandlerDeps, 'card' | 'sdk'> & {
  cardSource: AgentCardSource;
  /** `app.body_limit`. */
  bodyLimit: string;
  /** `memory.user_id`: the acting user when neither a key nor X-User-ID names one. */
  defaultUserId: string;
};

/** How long a client may keep the card (it lists the tools, which change as their servers connect). */
const CARD_MAX_AGE_S = 300;

/** JSON-RPC error codes of the requests refused before the SDK's transport reads them. */
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;

/** The caller of an A2A call: the acting user (by the API key, else X-User-ID, else the default), the request's id, and whether its client went away. */
export class ActingUser implements User {
  constructor(
    readonly userName: string,
    readonly requestId: string | undefined,
    /** Aborts when the client's connection closes: a wait or a stream for it ends (the task runs on). */
    readonly gone: AbortSignal,
  ) {}

  get isAuthenticated(): boolean {
    return true;
  }
}

/**
 * The A2A server: `card` serves the agent card (public, as the specification requires: mount
 * it before the API key check), `rpc` the JSON-RPC endpoint (mount it at `A2A_PATH` behind
 * the key check and before the app's body parser, so a body that is not JSON is a JSON-RPC
 * parse error, not the OpenAI error the other routes answer). The SDK is loaded by the first
 * request to either.
 */
export function createA2ARoutes(deps: A2ARoutesDeps): { card: RequestHandler; rpc: Router } {
  const card: RequestHandler = (req, res, next) => {
    a2aSdk.load().then(({ legacyAgentCardRouter, AgentCard, A2A_VERSION_HEADER }) => {
      // The card names the endpoint as the client reached it (behind a proxy, as `trust proxy` lets Express see it).
      const cardHere = agentCardOf(deps.cardSource, baseUrlOf(req));
      // A 0.3 client (or one naming no version) gets the SDK's 0.3 translation; the others the 1.0 card.
      const legacy = legacyAgentCardRouter({ agentCardProvider: () => Promise.resolve(cardHere), cache: { maxAge: CARD_MAX_AGE_S } });
      // It passes a request of another version on (`next('router')`, which reaches here as no error).
      void legacy(req, res, (error?: unknown) => {
        if (error && error !== 'router') {
          next(error);
          return;
        }
        // Its JSON form, as the specification gives it (the SDK's own 1.0 card handler sends the
        // in-memory form, whose security schemes no client reads: `{ scheme: { $case, value } }`).
        res.set('Cache-Control', `public, max-age=${CARD_MAX_AGE_S}`).append('Vary', A2A_VERSION_HEADER).json(AgentCard.toJSON(cardHere));
      });
    }).catch(next);
  };
  const rpc = Router();
  rpc.use(express.json({ limit: deps.bodyLimit, type: () => true, strict: false }), bodyErrors);
  rpc.use(asRpcErrors(holdToTextRules));
  rpc.use(
    asRpcErrors((req, res, next) => {
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      res.locals.a2aUser = new ActingUser(userOf(req, res, deps.defaultUserId), res.locals.requestId as string | undefined, gone.signal);
      next();
    }),
  );
  // The SDK's JSON-RPC transport over the handler, made once the SDK is loaded.
  let transport: RequestHandler | undefined;
  rpc.use((req, res, next) => {
    if (transport) return transport(req, res, next);
    a2aSdk.load().then((sdk) => {
      transport ??= sdk.jsonRpcHandler({
        requestHandler: new A2AHandler({ ...deps, sdk, card: () => agentCardOf(deps.cardSource, '') }),
        userBuilder: (request) => Promise.resolve((request.res as Response).locals.a2aUser as ActingUser),
        legacyCompat: { enabled: true },
      });
      transport(req, res, next);
    }).catch(next);
  });
  return { card, rpc };
}

function baseUrlOf(req: Request): string {
  return `${req.protocol}://${req.get('host') ?? 'localhost'}`;
}

/** A JSON-RPC error answer to a request refused before the transport read it. */
function sendRpcError(res: Response, code: number, message: string): void {
  res.status(200).json({ jsonrpc: '2.0', id: null, error: { code, message } });
}

/** A body that is not JSON, or too large, refused as JSON-RPC refuses it. */
const bodyErrors: ErrorRequestHandler = (error: { type?: string; message?: string }, _req, res, next) => {
  if (error.type === 'entity.parse.failed') sendRpcError(res, PARSE_ERROR, 'Invalid JSON payload.');
  else if (typeof error.type === 'string' && error.type.startsWith('entity.')) sendRpcError(res, INVALID_REQUEST, error.message ?? 'the request body could not be read');
  else next(error);
};

/** A middleware whose refusals (the service's errors) are JSON-RPC invalid requests, as the A2A client reads them. */
function asRpcErrors(middleware: RequestHandler): RequestHandler {
  return (req, res, next) => {
    try {
      void middleware(req, res, next);
    } catch (error) {
      if (!isServiceError(error)) throw error;
      sendRpcError(res, INVALID_REQUEST, error.message);
    }
  };
}
