// POST /authz/check, /authz/check/bulk, /authz/explain on the management listener (snake_case bodies,
// INTERFACES.md section 3); bearer authentication comes from the auth domain.
import type { Principal } from '../auth/principal.js';
import { AppError, invalidInput, unauthenticated } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import type { HttpServer } from '../http/server.js';
import { JSON_HEADERS, json, type HttpRequest } from '../http/types.js';
import { SNAKE, parseActions, parseCheck, parseContext, parseObject, parseSubject, type CheckRuntime } from './api.js';

function readJson(req: HttpRequest): Record<string, unknown> {
  const type = req.headers['content-type'];
  if (type !== undefined && !type.toLowerCase().startsWith('application/json')) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
  }
  let body: unknown;
  try {
    body = JSON.parse(req.body.toString('utf8'));
  } catch {
    throw invalidInput('request body must be JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidInput('request body must be a JSON object');
  return body as Record<string, unknown>;
}

async function callerOf(req: HttpRequest, authenticate: Authenticate): Promise<Principal> {
  const header = req.headers.authorization;
  if (header === undefined || header === '') throw unauthenticated('missing Authorization header');
  if (!/^bearer /i.test(header)) throw unauthenticated('expected Bearer token');
  const principal = await authenticate(req.headers, req.ip);
  if (!principal) throw unauthenticated('invalid or expired token');
  return principal;
}

export function registerAuthzRoutes(server: HttpServer, deps: { runtime: CheckRuntime; authenticate: Authenticate; bodyLimit: number }): void {
  const { runtime, authenticate } = deps;
  const options = { bodyLimit: deps.bodyLimit };

  server.route('POST', '/authz/check', async (req) => {
    const principal = await callerOf(req, authenticate);
    const input = parseCheck(readJson(req), SNAKE);
    const d = await runtime.check(principal, input, req.requestId);
    const body = d.details
      ? JSON.stringify({ allowed: d.allowed, reason: d.reason, details: d.details })
      : JSON.stringify({ allowed: d.allowed, reason: d.reason });
    return { status: 200, headers: JSON_HEADERS, body };
  }, options);

  server.route('POST', '/authz/check/bulk', async (req) => {
    const principal = await callerOf(req, authenticate);
    const body = readJson(req);
    const subjectId = parseSubject(body.subject_id, SNAKE);
    const actions = parseActions(body.actions);
    const object = parseObject(body, SNAKE);
    const results = await runtime.bulk(principal, { subjectId, object, actions, context: parseContext(body.context) }, req.requestId);
    const target = object.kind === 'resource' ? { resource_id: object.id } : { resource_id: null, object_kind: object.kind, object_id: object.id };
    return json(200, { subject_id: subjectId, ...target, results });
  }, options);

  server.route('POST', '/authz/explain', async (req) => {
    const principal = await callerOf(req, authenticate);
    const input = parseCheck(readJson(req), SNAKE);
    return json(200, await runtime.explain(principal, input, req.requestId));
  }, options);
}
