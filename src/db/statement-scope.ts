// The statements one unit of work (a custom endpoint call) sends, so that work can be abandoned when its
// time limit passes: statements it has running or queued are cancelled, and any it would start afterwards
// are refused before they reach PostgreSQL (SPEC.md Limits: "the work it started is abandoned").
//
// The unit of work is followed through AsyncLocalStorage, because the services that run the statements
// take the pool at composition and never see the call. Its promise hooks cost nothing until the first
// scope is entered: a process that never runs a custom endpoint never pays for them.
//
// PostgreSQL cancels a backend, not a statement: a statement that ends while the cancel request is on its
// way lets it reach whatever that backend runs next. In a transaction that is this work's own next
// statement (or its rollback); a single statement on the shared pool may have another caller's statement
// queued behind it, which would then fail with 57014. The window is the cancel request's connect time,
// and only for a statement that ends at the very moment the limit passes.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Sql, TransactionSql } from './client.js';

/** What postgres.js exposes on a query: `executed` once sent or queued, `cancel()` (dequeue or cancel). */
interface TrackedQuery {
  readonly executed: boolean;
  cancel(): unknown;
}

type ScopeState = 'open' | 'abandoned' | 'closed';

export class StatementScope {
  private state: ScopeState = 'open';
  private readonly queries = new Set<TrackedQuery>();
  /** Statements refused or cancelled because the scope was abandoned. */
  stopped = 0;

  /** refusal: the error a statement started after abandonment fails with. */
  constructor(private readonly refusal: () => Error) {}

  /** Cancels what is running or queued; every later statement of this scope is refused. */
  abandon(): void {
    if (this.state !== 'open') return;
    this.state = 'abandoned';
    for (const query of this.queries) {
      // Never-executed queries are fragments or not yet awaited: cancelling them would reject a promise
      // nobody listens to; if one is awaited later it is still sent, so it is refused at the next watch.
      if (!query.executed) continue;
      this.stopped++;
      query.cancel();
    }
    this.queries.clear();
  }

  /** The work has ended (answered, failed or abandoned and drained): statements run untracked again. */
  close(): void {
    this.state = 'closed';
    this.queries.clear();
  }

  /** Whether statements sent under this scope are refused now. */
  get abandoned(): boolean {
    return this.state === 'abandoned';
  }

  watch<Q extends TrackedQuery>(query: Q): Q {
    if (this.state === 'open') this.queries.add(query);
    else if (this.state === 'abandoned') this.refuse();
    return query;
  }

  refuse(): void {
    if (this.state !== 'abandoned') return;
    this.stopped++;
    throw this.refusal();
  }
}

const scopes = new AsyncLocalStorage<StatementScope>();

/** Runs fn with every statement of a scoped pool sent during it (and its continuations) in scope. */
export function runInScope<T>(scope: StatementScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

/** The scope the calling work runs in, if any (for work handed to a queue shared between callers). */
export function currentScope(): StatementScope | undefined {
  return scopes.getStore();
}

/**
 * Runs fn outside any scope: work shared between callers (a batch gathered from several, a load others
 * wait for) must not be cancelled because the call that happened to start it was abandoned.
 */
export function outsideScopes<T>(fn: () => T): T {
  return scopes.exit(fn);
}

function watch<Q extends TrackedQuery>(query: Q): Q {
  const scope = scopes.getStore();
  return scope ? scope.watch(query) : query;
}

function isTemplateCall(args: unknown[]): boolean {
  const first = args[0] as { raw?: unknown } | null | undefined;
  return Array.isArray(first) && Array.isArray(first.raw);
}

type Callback = (tx: TransactionSql) => unknown;

/** A transaction (or savepoint) whose callback gets a scoped handle; refused when the scope is abandoned. */
function scopedTransaction(start: (...args: unknown[]) => unknown, owner: unknown) {
  return (...args: unknown[]) => {
    scopes.getStore()?.refuse();
    const fn = args[args.length - 1] as Callback;
    const rest = args.slice(0, -1);
    if (typeof fn !== 'function') return start.apply(owner, args);
    return start.apply(owner, [...rest, (tx: TransactionSql) => fn(scoped(tx))]);
  };
}

function scoped<S extends Sql | TransactionSql>(target: S): S {
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(target, {
    apply(fn, self, args: unknown[]) {
      const result = Reflect.apply(fn as (...a: unknown[]) => unknown, self, args);
      // Only tagged templates are statements; sql(value) builds identifiers and helpers.
      return isTemplateCall(args) ? watch(result as TrackedQuery) : result;
    },
    get(fn, prop) {
      const value = Reflect.get(fn, prop) as unknown;
      if (typeof value !== 'function') return value;
      if (prop !== 'unsafe' && prop !== 'file' && prop !== 'begin' && prop !== 'savepoint') return value;
      let method = wrapped.get(prop);
      if (!method) {
        const original = value as (...args: unknown[]) => unknown;
        method = prop === 'begin' || prop === 'savepoint'
          ? scopedTransaction(original, fn)
          : (...args: unknown[]) => watch(original.apply(fn, args) as TrackedQuery);
        wrapped.set(prop, method);
      }
      return method;
    },
  });
}

/**
 * The pool as the services that may run inside a scope see it: the same pool, with each statement sent
 * inside a scope tracked by it, transactions included. Outside any scope it only forwards.
 */
export function scopedPool(sql: Sql): Sql {
  return scoped(sql);
}
