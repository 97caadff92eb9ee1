// The per-request GraphQL context: request facts, the lazily authenticated caller, per-request loaders.
import { unauthenticated } from '../errors.js';
import type { Principal } from '../auth/principal.js';

export type Authenticate = (headers: Record<string, string>) => Promise<Principal | null>;

interface RequestFacts {
  readonly requestId: string;
  readonly ip: string;
  readonly headers: Record<string, string>;
}

/** One per request; methods live on the prototype so building it allocates one object. */
export class GraphqlContext {
  private pending: Promise<Principal | null> | undefined = undefined;
  private memo: Map<string, unknown> | undefined = undefined;

  constructor(
    private readonly request: RequestFacts,
    private readonly authenticate: Authenticate,
  ) {}

  get requestId(): string {
    return this.request.requestId;
  }

  /** Read through: the peer address is only looked up when something (rate limits, audit) asks for it. */
  get ip(): string {
    return this.request.ip;
  }

  get headers(): Record<string, string> {
    return this.request.headers;
  }

  /** The verified caller or null; authentication runs once, on first use, so public fields cost nothing. */
  principal(): Promise<Principal | null> {
    return (this.pending ??= this.authenticate(this.request.headers));
  }

  /** The verified caller; throws UNAUTHENTICATED ('missing authentication') when there is none. */
  async caller(): Promise<Principal> {
    const p = await this.principal();
    if (!p) throw unauthenticated();
    return p;
  }

  /** Per-request memo for batch loaders, keyed by loader name. */
  get loaders(): Map<string, unknown> {
    return (this.memo ??= new Map());
  }
}

export function createContext(request: RequestFacts, authenticate: Authenticate): GraphqlContext {
  return new GraphqlContext(request, authenticate);
}

/** A context for work the service does on its own behalf (custom endpoints in service context, tests). */
export function contextFor(principal: Principal | null, requestId: string): GraphqlContext {
  return new GraphqlContext({ requestId, ip: '', headers: {} }, async () => principal);
}
