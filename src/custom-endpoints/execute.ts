// Running an endpoint's operation: through the same executor (compiled-query cache) as POST /graphql, as
// the caller or as the endpoint's service entity, within the time limit. When the limit passes the work is
// abandoned: its statements running or queued are cancelled (a transaction then rolls back), and every
// resolver or statement it would start afterwards is refused before it does anything.
import type { Principal } from '../auth/principal.js';
import type { Sql } from '../db/client.js';
import { runInScope, StatementScope } from '../db/statement-scope.js';
import { AppError, forbidden, invalidInput } from '../errors.js';
import { GraphqlContext } from '../graphql/context.js';
import type { GraphqlExecutor } from '../graphql/executor.js';
import { serviceEntityState } from './queries.js';
import type { Route } from './router.js';

export const TIMED_OUT = 'custom endpoint execution timed out';
export const EXECUTION_FAILED = 'GraphQL execution failed';

interface RequestFacts {
  readonly requestId: string;
  readonly ip: string;
  readonly headers: Record<string, string>;
}

const NOBODY = async () => null;

/** The GraphQL context of one call: its principal fixed, and refusing all work once abandoned. */
class EndpointContext extends GraphqlContext {
  private abandoned = false;

  constructor(request: RequestFacts, private readonly who: Principal, private readonly onRefused: () => void) {
    super(request, NOBODY);
  }

  abandon(): void {
    this.abandoned = true;
  }

  private refuseIfAbandoned(): void {
    if (!this.abandoned) return;
    this.onRefused();
    throw invalidInput(TIMED_OUT);
  }

  override principal(): Promise<Principal | null> {
    this.refuseIfAbandoned();
    return Promise.resolve(this.who);
  }

  override async caller(): Promise<Principal> {
    this.refuseIfAbandoned();
    return this.who;
  }

  override get loaders(): Map<string, unknown> {
    this.refuseIfAbandoned();
    return super.loaders;
  }

  // The HTTP request may be answered (timed out) while abandoned work still runs: it no longer has a peer.
  override get ip(): string {
    return this.abandoned ? '' : super.ip;
  }
}

export type Outcome = { data: unknown } | { errors: unknown[] };

export interface ExecuteDeps {
  sql: Sql;
  executor: () => GraphqlExecutor;
  timeoutMs: number;
  stats: ExecutionStats;
}

export interface ExecutionStats {
  /** Calls answered TIMED_OUT. */
  timeouts: number;
  /** Resolvers refused because their call had timed out. */
  refusedAfterTimeout: number;
  /** Statements of timed-out calls cancelled while running or queued, or refused before being sent. */
  statementsStopped: number;
  /** Timed-out calls whose work has since ended (every resolver settled). */
  abandonedEnded: number;
}

/**
 * service_context runs as the endpoint's service entity, which must be active and live, in an active
 * tenant or platform-level (SPEC.md "Authentication" 9); anything else is FORBIDDEN at execution time.
 */
export async function servicePrincipal(sql: Sql, route: Route): Promise<Principal> {
  const id = route.serviceEntityId;
  const state = id ? await serviceEntityState(sql, id) : undefined;
  if (!id || !state || state.deleted || state.status !== 'active') throw forbidden();
  if (state.tenant_id !== null && (state.tenant_deleted || state.tenant_status !== 'active')) throw forbidden();
  return {
    entityId: id, entityKind: state.kind as Principal['entityKind'], homeTenantId: state.tenant_id, tenantId: null,
    sessionId: null, credentialId: null, credentialKind: 'access_token', scoped: false,
  };
}

/** The execution's answer, or TIMED_OUT once the limit passes first (its work is then abandoned). */
function withinLimit(out: Promise<string>, ctx: EndpointContext, scope: StatementScope, deps: ExecuteDeps): Promise<string> {
  return new Promise((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctx.abandon();
      scope.abandon();
      deps.stats.timeouts++;
      reject(new AppError('INVALID_INPUT', TIMED_OUT));
    }, deps.timeoutMs);
    // Runs when the last resolver settles, which after a timeout is when the abandoned work has drained.
    const ended = () => {
      clearTimeout(timer);
      scope.close();
      deps.stats.statementsStopped += scope.stopped;
      if (timedOut) deps.stats.abandonedEnded++;
    };
    out.then((text) => {
      ended();
      resolve(text);
    }, (err: unknown) => {
      ended();
      reject(err);
    });
  });
}

/** Executes the route's operation; resolves with the data or the GraphQL errors, rejects with TIMED_OUT. */
export async function executeRoute(deps: ExecuteDeps, route: Route, variables: Record<string, unknown>, principal: Principal, request: RequestFacts): Promise<Outcome> {
  const ctx = new EndpointContext(request, principal, () => {
    deps.stats.refusedAfterTimeout++;
  });
  const scope = new StatementScope(() => invalidInput(TIMED_OUT));
  const out = runInScope(scope, () => deps.executor().execute({ query: route.graphql, variables, operationName: null }, ctx));
  const text = typeof out === 'string' ? out : await withinLimit(out, ctx, scope, deps);
  const result = JSON.parse(text) as { data?: unknown; errors?: unknown[] };
  if (result.errors && result.errors.length > 0) return { errors: result.errors };
  return { data: result.data ?? null };
}
