// Running an endpoint's operation: through the same executor (compiled-query cache) as POST /graphql, as
// the caller or as the endpoint's service entity, within the time limit; work still pending when the limit
// passes is abandoned: every resolver that starts afterwards is refused before it does anything.
import type { Principal } from '../auth/principal.js';
import type { Sql } from '../db/client.js';
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
  stats: { timeouts: number; refusedAfterTimeout: number };
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

/** The execution's answer, or TIMED_OUT once the limit passes first (the context is then abandoned). */
function withinLimit(out: Promise<string>, ctx: EndpointContext, deps: ExecuteDeps): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      ctx.abandon();
      deps.stats.timeouts++;
      // Nobody reads the answer any more; what is in flight ends on its own, nothing new starts.
      reject(new AppError('INVALID_INPUT', TIMED_OUT));
    }, deps.timeoutMs);
    out.then((text) => {
      clearTimeout(timer);
      resolve(text);
    }, (err: unknown) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Executes the route's operation; resolves with the data or the GraphQL errors, rejects with TIMED_OUT. */
export async function executeRoute(deps: ExecuteDeps, route: Route, variables: Record<string, unknown>, principal: Principal, request: RequestFacts): Promise<Outcome> {
  const ctx = new EndpointContext(request, principal, () => {
    deps.stats.refusedAfterTimeout++;
  });
  const out = deps.executor().execute({ query: route.graphql, variables, operationName: null }, ctx);
  const text = typeof out === 'string' ? out : await withinLimit(out, ctx, deps);
  const result = JSON.parse(text) as { data?: unknown; errors?: unknown[] };
  if (result.errors && result.errors.length > 0) return { errors: result.errors };
  return { data: result.data ?? null };
}
