// Calls of custom endpoints, `<method> /api/custom/...` on the management listener, in SPEC.md's order:
// lookup (404), bearer authentication (401), action check (403) before any body is taken; then the body
// (413, JSON, requestSchema: 400), variables, execution (403 for an unusable service entity, 400 on
// GraphQL errors or the time limit), response shaping. Every call of an endpoint leaves one execution
// record, its secrets redacted by the endpoint's secret plan; a request naming no endpoint leaves none.
import type { BearerAuthentication } from '../auth/bearer.js';
import { bearerCaller } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { answerTooLarge, AppError, forbidden, invalidInput, notFound, payloadTooLarge, rateLimited, toAppError } from '../errors.js';
import type { GraphqlExecutor } from '../graphql/executor.js';
import type { RateLimiter } from '../http/rate-limit.js';
import type { HttpServer } from '../http/server.js';
import { JSON_HEADERS, errorReply, type HttpReply, type HttpRequest } from '../http/types.js';
import { jsonBytes, utf8Within } from '../json-size.js';
import type { Logger } from '../log.js';
import { jsonNesting } from '../graphql/limits.js';
import { utf8Text, wellFormedJson } from '../validate.js';
import { EXECUTION_FAILED, executeRoute, servicePrincipal, type ExecuteDeps } from './execute.js';
import type { CallRecord, ExecutionLog } from './execution-log.js';
import { buildVariables, shapeResponse } from './mapping.js';
import type { Route, Router } from './router.js';
import { planSecrets, type SecretPlan } from './secrets.js';

export const CUSTOM_PREFIX = '/api/custom/';
const CALL_ACTIONS = ['execute', 'manage'] as const;

export interface CallDeps {
  router: Router;
  auth: BearerAuthentication;
  authz: AuthzService;
  /** Absent when rate limits are off (the client address is then never read). */
  limiter: RateLimiter | undefined;
  executions: ExecutionLog;
  sql: Sql;
  executor: () => GraphqlExecutor;
  /** answerMaxBytes: the most bytes one call's answer may have (SVC_ANSWER_MAX_BYTES). */
  settings: { bodyLimitBytes: number; timeoutMs: number; maxNesting: number; answerMaxBytes: number };
  stats: ExecuteDeps['stats'];
  log: Logger;
}

/** What the precheck established for the handler. */
interface Admitted {
  route: Route;
  caller: Principal;
  path: string;
}

/** Stored paths are compared decoded: a client may escape what the path holds ('%20' for a space). */
function decodedPath(raw: string): string | null {
  if (raw.indexOf('%') === -1) return raw;
  try {
    return decodeURI(raw);
  } catch {
    return null;
  }
}

const reply = (status: number, body: string): HttpReply => ({ status, headers: JSON_HEADERS, body });

export function registerCustomEndpointRoutes(server: HttpServer, deps: CallDeps): void {
  const { router, auth, authz, executions } = deps;
  const admitted = new WeakMap<HttpRequest, Admitted>();
  const execDeps: ExecuteDeps = { sql: deps.sql, executor: deps.executor, timeoutMs: deps.settings.timeoutMs, stats: deps.stats };
  const maxAnswer = deps.settings.answerMaxBytes;
  const tooLargeMessage = answerTooLarge(maxAnswer).message;

  /** What a refused call's record holds besides its method and error: denied unless a status is given. */
  type Refused = Pick<CallRecord, 'endpointId' | 'callerEntityId' | 'path'> & Partial<Pick<CallRecord, 'status' | 'variables' | 'response' | 'secrets'>>;

  /** The error reply of a call, recorded. */
  function refuse(req: HttpRequest, err: AppError, r: Refused): HttpReply {
    executions.record({
      endpointId: r.endpointId, callerEntityId: r.callerEntityId, status: r.status ?? 'denied', method: req.method, path: r.path,
      variables: r.variables ?? null, response: r.response, error: err.message, secrets: r.secrets,
    });
    return errorReply(err);
  }

  // Worked out on a route's first call; a changed endpoint is a new route object, so its plan goes with the old one.
  const plans = new WeakMap<Route, SecretPlan>();
  function secretsOf(route: Route): SecretPlan {
    let plan = plans.get(route);
    if (!plan) {
      const executor = deps.executor();
      plan = planSecrets(executor.schema, route.graphql, executor.check(route.graphql).length === 0, route.variables, route.response);
      plans.set(route, plan);
    }
    return plan;
  }

  /** execute or manage on the endpoint object, which covers its tenant's (or the platform's) scope too. */
  async function mayCall(caller: Principal, route: Route): Promise<boolean> {
    const object = { kind: 'api_endpoint' as const, id: route.id };
    if ((await authz.decide(caller, 'execute', object)).allowed) return true;
    return (await authz.decide(caller, 'manage', object)).allowed;
  }

  /** The same question answered from the decision cache without a promise; undefined when not cached as allowed. */
  function mayCallNow(caller: Principal, route: Route): true | undefined {
    const ceilingCredentialId = caller.scoped ? (caller.credentialId ?? 'missing-credential') : null;
    const object = { kind: 'api_endpoint' as const, id: route.id };
    for (const action of CALL_ACTIONS) {
      if (authz.engine.peek({ subjectId: caller.entityId, action, object, ceilingCredentialId })?.allowed) return true;
    }
    return undefined;
  }

  async function admit(req: HttpRequest, route: Route, path: string, pending: Principal | Promise<Principal>): Promise<HttpReply | undefined> {
    let caller: Principal;
    try {
      caller = await pending;
    } catch (err) {
      return refuse(req, toAppError(err), { endpointId: route.id, callerEntityId: null, path });
    }
    if (!(await mayCall(caller, route))) return refuse(req, forbidden(), { endpointId: route.id, callerEntityId: caller.entityId, path });
    admitted.set(req, { route, caller, path });
    return undefined;
  }

  function precheck(req: HttpRequest): HttpReply | Promise<HttpReply | undefined> | undefined {
    const wait = deps.limiter?.hit('custom_endpoints', req.ip, req.headers) ?? 0;
    if (wait > 0) return errorReply(rateLimited(wait));
    const path = decodedPath(req.path) ?? req.path;
    const route = router.lookup(req.method, path);
    // Not a call of any endpoint: nothing is recorded, so anonymous requests cannot grow the log.
    if (!route) return errorReply(notFound(`custom endpoint ${path}`));
    let pending: Principal | Promise<Principal>;
    try {
      pending = bearerCaller(req.headers, auth);
    } catch (err) {
      return refuse(req, toAppError(err), { endpointId: route.id, callerEntityId: null, path });
    }
    // A caller verified and allowed before: admitted at once, and the body is read in the same turn.
    if (!(pending instanceof Promise) && mayCallNow(pending, route)) {
      admitted.set(req, { route, caller: pending, path });
      return undefined;
    }
    return admit(req, route, path, pending);
  }

  function parseBody(req: HttpRequest): unknown {
    if (req.body.length === 0) return {};
    const text = utf8Text(req.body, 'custom endpoint request body');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw invalidInput(`custom endpoint request body must be JSON: ${(err as Error).message}`);
    }
    // The body becomes GraphQL variables, which may nest no deeper than a /graphql request's; deeper,
    // the walks after this one (requestSchema, the execution record) would recurse without bound.
    if (typeof body === 'object' && body !== null && jsonNesting(body, deps.settings.maxNesting) > deps.settings.maxNesting) {
      throw invalidInput(`custom endpoint request body nests deeper than ${deps.settings.maxNesting} levels`);
    }
    wellFormedJson(text, body, 'custom endpoint request body');
    return body;
  }

  async function call(req: HttpRequest): Promise<HttpReply> {
    const { route, caller, path } = admitted.get(req) as Admitted;
    admitted.delete(req);
    if (route.refusal) return refuse(req, invalidInput(route.refusal), { endpointId: route.id, callerEntityId: caller.entityId, path, status: 'error' });
    const base = { endpointId: route.id, callerEntityId: caller.entityId, path, secrets: secretsOf(route) };
    let variables: Record<string, unknown>;
    try {
      const body = parseBody(req);
      route.checkBody?.(body);
      variables = buildVariables(route.variables, {
        body, query: req.query, headers: req.headers, path,
        auth: { entityId: caller.entityId, tenantId: caller.tenantId ?? caller.homeTenantId, sessionId: caller.sessionId },
      });
    } catch (err) {
      return refuse(req, toAppError(err), { ...base, status: 'error' });
    }
    let principal = caller;
    if (route.authMode === 'service_context') {
      try {
        principal = await servicePrincipal(deps.sql, route);
      } catch (err) {
        return refuse(req, toAppError(err), { ...base, variables });
      }
    }
    let outcome;
    try {
      outcome = await executeRoute(execDeps, route, variables, principal, req);
    } catch (err) {
      return refuse(req, toAppError(err), { ...base, status: 'error', variables });
    }
    if ('errors' in outcome) {
      // The details stay in the execution record; the caller learns only that it failed, or that it asked too much.
      const error = outcome.errors.some((e) => (e as { message?: unknown }).message === tooLargeMessage) ? answerTooLarge(maxAnswer) : invalidInput(EXECUTION_FAILED);
      return refuse(req, error, { ...base, status: 'error', variables, response: { errors: outcome.errors } });
    }
    const shaped = shapeResponse(route.response, outcome.data);
    // A responseMapping may pick the same data many times: the answer is measured (up to the cap) before it is built.
    if (jsonBytes(shaped, maxAnswer) > maxAnswer) return refuse(req, answerTooLarge(maxAnswer), { ...base, status: 'error', variables });
    const text = JSON.stringify(shaped);
    if (!utf8Within(text, maxAnswer)) return refuse(req, answerTooLarge(maxAnswer), { ...base, status: 'error', variables });
    executions.record({ ...base, status: 'success', method: req.method, variables, response: shaped, responseText: text, error: null });
    return reply(200, text);
  }

  function onTooLarge(req: HttpRequest): void {
    const entry = admitted.get(req);
    if (!entry) return;
    admitted.delete(req);
    executions.record({
      endpointId: entry.route.id, callerEntityId: entry.caller.entityId, status: 'error', method: req.method, path: entry.path,
      variables: null, error: payloadTooLarge(deps.settings.bodyLimitBytes).message,
    });
  }

  server.route('ANY', `${CUSTOM_PREFIX}*`, call, { bodyLimit: deps.settings.bodyLimitBytes, headers: 'all', precheck, onTooLarge });
}
