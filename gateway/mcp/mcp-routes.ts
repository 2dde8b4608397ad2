import { readFileSync } from 'node:fs';
import express, { Router, type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import type { InitializeRequest, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { packageFile } from '../../config/package-files.js';
import type { StateGraph } from '../../machines/index.js';
import type { NotificationChannel, SessionStore } from '../../runtime/ports.js';
import { deleteSession, type SessionDeletionDeps } from '../../runtime/sessions/session-deletion.js';
import { userOf } from '../http/acting-user.js';
import { toServiceError } from '../http/error-handler.js';
import { findTextFault, paramOf } from '../http/text-rules.js';
import { callAgent, type AgentCallDeps } from './agent-call.js';
import { agentTool, MCP_SERVER_NAME } from './agent-tool.js';
import { ClientAnswerRelay } from './client-answer-relay.js';
import { agentSessionOf, elicitsForms, mcpSessionFacts, newMcpSessionId } from './mcp-session-ids.js';
import { mcpServerSdk, type McpServerSdk } from './mcp-server-sdk.js';

/** What the MCP endpoint is built from. */
export type McpRoutesDeps = Omit<AgentCallDeps, 'sdk'> & {
  graph: StateGraph;
  /** Where the client's follow-ups reach the request they concern in another process (see ClientAnswerRelay); none: this process only. */
  followUps?: NotificationChannel;
  /** What ending an MCP session touches: its agent session is marked ended. */
  deletion: SessionDeletionDeps;
  sessions: SessionStore;
  /** The user of a request whose key names none and that names none (`memory.user_id`). */
  defaultUserId: string;
  /** `app.body_limit`. */
  bodyLimit: string;
};

const VERSION = (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string }).version;

/** JSON-RPC's code for a session the server does not know (the SDK's). */
const SESSION_NOT_FOUND = -32001;

/** The `/mcp` routes, and what stops them (the relay's listening) when the service stops. */
export type McpRoutes = { router: Router; close(): Promise<void> };

/**
 * `/mcp`: the agent as an MCP server over Streamable HTTP. Each POST is served by a server and a
 * transport of its own, in stateless mode, and the MCP session is this route's: minted at
 * `initialize` (its id says whether the client answers elicitations), and carried by every
 * request in `Mcp-Session-Id`. Nothing of a session lives in a process's memory: its
 * conversation is the agent session derived from its id and the user, stored like every other,
 * so any worker or instance continues it. DELETE ends it; GET is 405 (the server sends nothing
 * outside a request).
 *
 * The MCP SDK is loaded, and the relay starts listening, at the first request to `/mcp`: a
 * service no MCP client calls pays for neither.
 */
export function createMcpRoutes(deps: McpRoutesDeps): McpRoutes {
  let serving: Promise<{ relay: ClientAnswerRelay; routes: Router }> | undefined;
  const serve = () => {
    serving ??= (async () => {
      const sdk = await mcpServerSdk.load();
      const relay = new ClientAnswerRelay(sdk, deps.followUps);
      await relay.start();
      return { relay, routes: mcpRoutes(sdk, relay, deps) };
    })();
    // A start that failed (the database away) is tried again by the next request.
    serving.catch(() => (serving = undefined));
    return serving;
  };
  const router = Router();
  router.use(MCP_PATH, (req, res, next) => {
    serve().then(({ routes }) => routes(req, res, next), next);
  });
  const close = async () => {
    const served = await serving?.catch(() => undefined);
    await served?.relay.close();
  };
  return { router, close };
}

/** Where the MCP endpoint is. */
const MCP_PATH = '/mcp';

/** The routes of `/mcp` (mounted there), once the SDK is loaded. */
function mcpRoutes(sdk: McpServerSdk, relay: ClientAnswerRelay, routeDeps: McpRoutesDeps): Router {
  const { ErrorCode } = sdk;
  const deps = { ...routeDeps, sdk };
  const router = Router();
  const tool = agentTool(deps.graph);
  // Shared: the server builds an Ajv instance of its own otherwise, on every request.
  const jsonSchemaValidator = new sdk.AjvJsonSchemaValidator();

  const post: RequestHandler = async (req, res) => {
    const userId = userOf(req, res, deps.defaultUserId);
    const body: unknown = req.body;
    const fault = findTextFault(body);
    if (fault) return jsonRpcError(res, 400, ErrorCode.InvalidRequest, `Invalid value for '${paramOf(fault.path)}': ${fault.fault}`);
    const raw = Array.isArray(body) ? body : [body];
    const messages = raw.map((message) => sdk.JSONRPCMessageSchema.safeParse(message));
    const valid = messages.every((parsed) => parsed.success);
    if (!valid) return jsonRpcError(res, 400, ErrorCode.InvalidRequest, 'Invalid Request: the body must be a JSON-RPC 2.0 message or an array of them');
    const parsed = messages.map((message) => message.data as JSONRPCMessage);
    const initialize = parsed.find(sdk.isInitializeRequest) as (JSONRPCMessage & InitializeRequest) | undefined;
    let session: string;
    let elicits: boolean;
    if (initialize) {
      elicits = elicitsForms(initialize.params.capabilities);
      session = newMcpSessionId({ elicits });
      res.setHeader('Mcp-Session-Id', session);
    } else {
      const named = sessionOf(req, res);
      if (!named) return;
      ({ session, elicits } = named);
    }
    const agentSession = agentSessionOf(session, userId);
    const requests = parsed.filter(sdk.isJSONRPCRequest);
    if (requests.length === 0) {
      // Answers and notifications only: each follow-up goes to its request, wherever it runs. Keyed
      // by the agent session, they reach only requests of the same MCP session and the same user.
      await Promise.all(parsed.filter((message) => relay.isFollowUp(message)).map((message) => relay.route(agentSession, message)));
      res.status(202).end();
      return;
    }
    if (!initialize && (await deps.sessions.get(agentSession))?.deletedAt) {
      return jsonRpcError(res, 404, SESSION_NOT_FOUND, 'Session not found: it was ended (DELETE /mcp). Start a new one with initialize.');
    }
    if (!initialize) res.setHeader('X-Session-ID', agentSession);
    const server = new sdk.Server({ name: MCP_SERVER_NAME, version: VERSION }, { capabilities: { tools: {} }, instructions: tool.description, jsonSchemaValidator });
    server.setRequestHandler(sdk.ListToolsRequestSchema, () => ({ tools: [tool] }));
    server.setRequestHandler(sdk.CallToolRequestSchema, (request, extra) =>
      callAgent(deps, { userId, agentSession, requestId: res.locals.requestId as string | undefined, elicits, res }, request, extra),
    );
    // The transport reports what it answers itself (a bad Accept header, an invalid message): nothing to log.
    server.onerror = () => undefined;
    const transport = new sdk.StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const detach = relay.attach(transport, agentSession, requests.map((request) => request.id));
    res.on('close', () => {
      detach();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const remove: RequestHandler = async (req, res) => {
    const userId = userOf(req, res, deps.defaultUserId);
    const named = sessionOf(req, res);
    if (!named) return;
    const agentSession = agentSessionOf(named.session, userId);
    // A session with no turn yet gets its row now, so that it too stays ended.
    await deps.sessions.claim(agentSession, userId);
    // Its transcript stays readable (GET /v1/agents/{id}/messages); DELETE /v1/agents/{id} erases it.
    const deletion = await deleteSession(deps.deletion, agentSession, { preserveMemory: true });
    if (deletion?.wasDeleted) return jsonRpcError(res, 404, SESSION_NOT_FOUND, 'Session not found: it was ended already.');
    res.status(200).end();
  };

  const notAllowed: RequestHandler = (_req, res) => {
    res.setHeader('Allow', 'POST, DELETE');
    jsonRpcError(res, 405, ErrorCode.ConnectionClosed, 'Method not allowed: this server sends messages only in answer to a POST, so it has no stream to GET.');
  };

  /** The MCP session a request names in `Mcp-Session-Id`, or undefined when it answered the request with the error (400 none, 404 not one of ours). */
  const sessionOf = (req: Request, res: Response): { session: string; elicits: boolean } | undefined => {
    const session = req.get('mcp-session-id');
    if (session === undefined) {
      jsonRpcError(res, 400, ErrorCode.ConnectionClosed, 'Bad Request: Mcp-Session-Id header is required (send initialize first, then its Mcp-Session-Id with every request)');
      return undefined;
    }
    const facts = mcpSessionFacts(session);
    if (!facts) {
      jsonRpcError(res, 404, SESSION_NOT_FOUND, 'Session not found: start a new one with initialize.');
      return undefined;
    }
    return { session, ...facts };
  };

  /** A body that is not JSON is JSON-RPC's parse error; one too large, a JSON-RPC error with the 413. Other errors go on to the OpenAI error handler. */
  const bodyErrors: ErrorRequestHandler = (error, _req, res, next) => {
    const failure = toServiceError(error);
    if (res.headersSent) return next(error);
    if (failure.code === 'INVALID_JSON') return jsonRpcError(res, 400, ErrorCode.ParseError, 'Parse error: the body is not valid JSON');
    if (failure.code === 'PAYLOAD_TOO_LARGE') return jsonRpcError(res, 413, ErrorCode.InvalidRequest, failure.message);
    next(error);
  };

  router.post('/', express.json({ limit: deps.bodyLimit, type: () => true, strict: false }), post);
  router.delete('/', remove);
  router.all('/', notAllowed);
  router.use(bodyErrors);
  return router;
}

/** Answers with a JSON-RPC error that belongs to no request (`id` null), as the SDK's transport does. */
function jsonRpcError(res: Response, status: number, code: number, message: string): void {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}
