// POST /authz/check, /authz/check/bulk, /authz/explain on the management listener (snake_case bodies,
// INTERFACES.md section 3); bearer authentication comes from the auth domain.
import { bearerCaller, type BearerAuthentication } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { jsonObject, jsonText } from '../http/json-body.js';
import type { HttpServer } from '../http/server.js';
import { JSON_HEADERS, json, type HttpReply, type HttpRequest } from '../http/types.js';
import { SNAKE, parseActions, parseCheck, parseContext, parseObject, parseSubject, type CheckRuntime, type PreparedCheck } from './api.js';
import type { Decision } from './types.js';

const readJson = (req: HttpRequest) => jsonObject(jsonText(req));

// Devices and services ask the same few questions again and again: a check body is parsed, validated and
// keyed once, then answered from this map (bounded: it starts afresh when full). Bodies with a context are
// not kept: their decisions depend on it and are never memoised anyway.
const PREPARED_MAX = 4096;
const PREPARED_BODY_MAX = 1024;

// A memoised decision is one frozen object answered many times: its reply body is serialised once.
const replyBodies = new WeakMap<Decision, string>();

function checkReply(d: Decision): HttpReply {
  let body = replyBodies.get(d);
  if (body === undefined) {
    body = d.details
      ? JSON.stringify({ allowed: d.allowed, reason: d.reason, details: d.details })
      : JSON.stringify({ allowed: d.allowed, reason: d.reason });
    replyBodies.set(d, body);
  }
  return { status: 200, headers: JSON_HEADERS, body };
}

// What these routes read: no forwarded-for (the caller's address plays no part in a check).
const HEADERS = ['authorization', 'content-type', 'content-length', 'x-request-id'] as const;

export function registerAuthzRoutes(server: HttpServer, deps: { runtime: CheckRuntime; auth: BearerAuthentication; bodyLimit: number }): void {
  const { runtime, auth } = deps;
  const options = { bodyLimit: deps.bodyLimit, headers: HEADERS };

  const prepared = new Map<string, PreparedCheck>();

  function preparedCheck(req: HttpRequest): PreparedCheck {
    const text = jsonText(req);
    let p = prepared.get(text);
    if (p === undefined) {
      const input = parseCheck(jsonObject(text), SNAKE);
      p = runtime.prepare(Object.freeze({ ...input, object: Object.freeze(input.object) }));
      if (input.context === undefined && text.length <= PREPARED_BODY_MAX) {
        if (prepared.size >= PREPARED_MAX) prepared.clear();
        prepared.set(text, p);
      }
    }
    return p;
  }

  const check = (principal: Principal, p: PreparedCheck, requestId: string): HttpReply | Promise<HttpReply> => {
    // Devices and services call this on every request: with the token, the object, the caller's gate and
    // the answer memoised, the reply is written from within the request's own callback, no promise made.
    const decision = runtime.checkPrepared(principal, p, requestId);
    return decision instanceof Promise ? decision.then(checkReply) : checkReply(decision);
  };
  server.route('POST', '/authz/check', (req) => {
    const caller = bearerCaller(req.headers, auth);
    if (!(caller instanceof Promise)) return check(caller, preparedCheck(req), req.requestId);
    return caller.then((principal) => check(principal, preparedCheck(req), req.requestId));
  }, options);

  server.route('POST', '/authz/check/bulk', async (req) => {
    const principal = await bearerCaller(req.headers, auth);
    const body = readJson(req);
    const subjectId = parseSubject(body.subject_id, SNAKE);
    const actions = parseActions(body.actions);
    const object = parseObject(body, SNAKE);
    const results = await runtime.bulk(principal, { subjectId, object, actions, context: parseContext(body.context) }, req.requestId);
    const target = object.kind === 'resource' ? { resource_id: object.id } : { resource_id: null, object_kind: object.kind, object_id: object.id };
    return json(200, { subject_id: subjectId, ...target, results });
  }, options);

  server.route('POST', '/authz/explain', async (req) => {
    const principal = await bearerCaller(req.headers, auth);
    const input = parseCheck(readJson(req), SNAKE);
    return json(200, await runtime.explain(principal, input, req.requestId));
  }, options);
}
