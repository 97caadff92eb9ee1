// The per-request GraphQL context: request facts, the lazily authenticated caller, per-request loaders.
import { unauthenticated } from '../errors.js';
import type { Principal } from '../auth/principal.js';

export type Authenticate = (headers: Record<string, string>, ip: string) => Promise<Principal | null>;

export interface GraphqlContext {
  requestId: string;
  ip: string;
  headers: Record<string, string>;
  /** The verified caller or null; authentication runs once, on first use, so public fields cost nothing. */
  principal(): Promise<Principal | null>;
  /** The verified caller; throws UNAUTHENTICATED ('missing authentication') when there is none. */
  caller(): Promise<Principal>;
  /** Per-request memo for batch loaders, keyed by loader name. */
  loaders: Map<string, unknown>;
}

export function createContext(
  request: { requestId: string; ip: string; headers: Record<string, string> },
  authenticate: Authenticate,
): GraphqlContext {
  let pending: Promise<Principal | null> | undefined;
  const principal = () => (pending ??= authenticate(request.headers, request.ip));
  return {
    requestId: request.requestId,
    ip: request.ip,
    headers: request.headers,
    principal,
    async caller() {
      const p = await principal();
      if (!p) throw unauthenticated();
      return p;
    },
    loaders: new Map(),
  };
}

/** A context for work the service does on its own behalf (custom endpoints in service context, tests). */
export function contextFor(principal: Principal | null, requestId: string): GraphqlContext {
  return createContext({ requestId, ip: '', headers: {} }, async () => principal);
}
