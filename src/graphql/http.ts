// POST /graphql: decode the JSON envelope, build the request context, answer 200 with {data}/{errors}.
import { AppError, invalidInput } from '../errors.js';
import type { HttpServer } from '../http/server.js';
import { JSON_HEADERS, json, type HttpRequest } from '../http/types.js';
import { utf8Text, wellFormedJson } from '../validate.js';
import { createContext, type Authenticate } from './context.js';
import type { GraphqlExecutor, GraphqlRequest } from './executor.js';

function badRequest(req: HttpRequest, status: number, message: string) {
  return json(status, { errors: [{ message, extensions: { code: 'BAD_REQUEST', retryable: false, requestId: req.requestId } }] });
}

export function decodeGraphqlRequest(body: Buffer): GraphqlRequest {
  const text = utf8Text(body, 'request body');
  let envelope: unknown;
  try {
    envelope = JSON.parse(text);
  } catch {
    throw invalidInput('request body must be a JSON object with a query string');
  }
  if (typeof envelope !== 'object' || envelope === null || Array.isArray(envelope)) {
    throw invalidInput('request body must be a JSON object with a query string');
  }
  wellFormedJson(text, envelope, 'request body');
  const { query, variables, operationName } = envelope as Record<string, unknown>;
  if (typeof query !== 'string' || query.trim() === '') throw invalidInput('query must be a non-empty string');
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables))) {
    throw invalidInput('variables must be a JSON object');
  }
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
    throw invalidInput('operationName must be a string');
  }
  return {
    query,
    variables: (variables ?? null) as Record<string, unknown> | null,
    operationName: (operationName ?? null) as string | null,
  };
}

// Cookie and origin: browser sessions (the admin UI) authenticate with a cookie, checked against Origin.
// x-forwarded-for and user-agent: the login mutation throttles and audits by the client's address (behind
// a trusted proxy, the forwarded one), as POST /auth/login does.
const GRAPHQL_HEADERS = ['authorization', 'content-type', 'content-length', 'x-request-id', 'x-forwarded-for', 'cookie', 'origin', 'user-agent'];
const ok = (body: string) => ({ status: 200, headers: JSON_HEADERS, body });

export function registerGraphqlRoute(
  server: HttpServer,
  deps: { executor: GraphqlExecutor; authenticate: Authenticate; bodyLimit: number },
): void {
  server.route('POST', '/graphql', (req) => {
    const type = req.headers['content-type'];
    if (type !== undefined && !type.toLowerCase().startsWith('application/json')) {
      return badRequest(req, 415, 'Content-Type must be application/json');
    }
    let request: GraphqlRequest;
    try {
      request = decodeGraphqlRequest(req.body);
    } catch (err) {
      return badRequest(req, 400, (err as AppError).message);
    }
    const body = deps.executor.execute(request, createContext(req, deps.authenticate));
    return typeof body === 'string' ? ok(body) : body.then(ok);
  }, { bodyLimit: deps.bodyLimit, headers: GRAPHQL_HEADERS });
}
