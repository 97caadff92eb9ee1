// The routing table of custom endpoints: every active endpoint precompiled in memory (operation checked,
// mappings compiled, request schema compiled), found by method and path without a database read. It is
// rebuilt per endpoint on every change, here and, through the NOTIFY the table's trigger sends at commit,
// on every other instance; a lost LISTEN connection reloads it whole.
import type { NotifyHub } from '../db/notify-hub.js';
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import { compileResponse, compileVariables, type ResponsePlan, type VariablesPlan } from './mapping.js';
import { analyseOperation } from './operation.js';
import { activeEndpoints, findEndpoint, type EndpointRow } from './queries.js';
import type { BodyCheck, RequestSchemas } from './request-schema.js';

export const CHANGED_TOPIC = 'custom_endpoints.changed';

export interface Route {
  id: string;
  tenantId: string | null;
  method: string;
  path: string;
  graphql: string;
  authMode: 'caller_context' | 'service_context';
  serviceEntityId: string | null;
  variables: VariablesPlan;
  response: ResponsePlan;
  checkBody: BodyCheck;
  /** Set when the stored endpoint cannot run (introspection, a mapping no longer valid): the call is refused with it. */
  refusal: string | null;
}

export interface Router {
  /** Loads every active endpoint and starts following changes. */
  start(): Promise<void>;
  lookup(method: string, path: string): Route | undefined;
  /** Re-reads one endpoint (after a change committed) and applies it to the table. */
  reload(id: string): Promise<void>;
  /** Called after each change applied to the table (route undefined: the endpoint no longer answers). */
  onChange(listener: (id: string, route: Route | undefined) => void): () => void;
  readonly size: number;
  close(): void;
}

const EMPTY_VARIABLES: VariablesPlan = { forwardBody: true, targets: [] };
const EMPTY_RESPONSE: ResponsePlan = { whole: true, fields: [] };

/** A stored row as a route; what no longer passes the checks of a save becomes the route's refusal. */
export function compileRoute(row: EndpointRow, schemas: RequestSchemas): Route {
  const base = {
    id: row.id, tenantId: row.tenant_id, method: row.method, path: row.path, graphql: row.graphql,
    authMode: row.auth_mode, serviceEntityId: row.service_entity_id,
  };
  try {
    analyseOperation(row.graphql, row.operation_kind);
    return {
      ...base,
      variables: compileVariables(row.variables_mapping),
      response: compileResponse(row.response_mapping),
      checkBody: schemas.compile(row.request_schema),
      refusal: null,
    };
  } catch (err) {
    return { ...base, variables: EMPTY_VARIABLES, response: EMPTY_RESPONSE, checkBody: null, refusal: `custom endpoint cannot run: ${(err as Error).message}` };
  }
}

const routeKey = (method: string, path: string) => `${method} ${path}`;

export function createRouter(deps: { sql: Sql; hub: NotifyHub; schemas: RequestSchemas; log: Logger }): Router {
  const { sql, hub, schemas, log } = deps;
  const byKey = new Map<string, Route>();
  const byId = new Map<string, Route>();
  // A read that began later saw the database at least as new: its result wins, whatever order reads end in.
  let nextTicket = 0;
  const applied = new Map<string, number>();
  const listeners = new Set<(id: string, route: Route | undefined) => void>();
  const retries = new Set<NodeJS.Timeout>();
  const unsubscribe: (() => void)[] = [];
  let closed = false;

  function apply(id: string, row: EndpointRow | undefined, ticket: number): void {
    if ((applied.get(id) ?? -1) > ticket) return;
    applied.set(id, ticket);
    const old = byId.get(id);
    if (old) {
      byId.delete(id);
      const key = routeKey(old.method, old.path);
      if (byKey.get(key) === old) byKey.delete(key);
    }
    let route: Route | undefined;
    if (row && row.status === 'active') {
      route = compileRoute(row, schemas);
      if (route.refusal) log.warn('active custom endpoint cannot run', { id, path: row.path, refusal: route.refusal });
      byId.set(id, route);
      byKey.set(routeKey(route.method, route.path), route);
    }
    for (const listener of listeners) listener(id, route);
  }

  async function reload(id: string, attempt = 0): Promise<void> {
    const ticket = nextTicket++;
    try {
      apply(id, await findEndpoint(sql, id), ticket);
    } catch (err) {
      if (closed) return;
      // The table must not stay stale after a database hiccup: try again, backing off.
      log.error('custom endpoint reload failed; retrying', { id, err });
      const timer = setTimeout(() => {
        retries.delete(timer);
        void reload(id, attempt + 1);
      }, Math.min(30_000, 250 * 2 ** Math.min(attempt, 7)));
      timer.unref();
      retries.add(timer);
    }
  }

  async function reloadAll(): Promise<void> {
    const ticket = nextTicket++;
    const rows = await activeEndpoints(sql);
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      apply(row.id, row, ticket);
    }
    for (const id of [...byId.keys()]) if (!seen.has(id)) apply(id, undefined, ticket);
  }

  return {
    async start() {
      unsubscribe.push(hub.subscribe(CHANGED_TOPIC, (payload) => {
        const id = (payload as { id?: unknown } | null)?.id;
        if (typeof id === 'string') void reload(id);
        else void reloadAll().catch((err) => log.error('custom endpoint table reload failed', { err }));
      }));
      // Notifications may have been missed while the connection was down.
      unsubscribe.push(hub.onReconnect(() => {
        void reloadAll().catch((err) => log.error('custom endpoint table reload failed', { err }));
      }));
      await reloadAll();
    },
    lookup(method, path) {
      return byKey.get(routeKey(method, path));
    },
    reload: (id) => reload(id),
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get size() {
      return byKey.size;
    },
    close() {
      closed = true;
      for (const off of unsubscribe.splice(0)) off();
      for (const timer of retries) clearTimeout(timer);
      retries.clear();
    },
  };
}
