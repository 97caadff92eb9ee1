// Tenant id or alias -> {id, status} for the runtime credential check: a bounded LRU dropped by the auth
// NOTIFY on every instance (the tenants trigger fires on status, deletion and, since sql/0300, alias
// changes), so a tenant selector or a device's home tenant costs no query once seen. Misses are not kept.
import type { Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import { createIndexedLru } from '../indexed-lru.js';
import * as q from './queries.js';
import { INVALIDATE_TOPIC, TTL_RESOLUTION_MS, type AuthInvalidation } from './verifier.js';

export interface TenantState {
  id: string;
  status: string;
}

/** A tenant as the caller named it: exactly one of id (a UUID, checked by the caller) or alias. */
export type TenantSelector = { id: string; alias?: undefined } | { alias: string; id?: undefined };

export interface TenantStates {
  /** The cached state, without waiting; undefined when not held. */
  peek(selector: TenantSelector): TenantState | undefined;
  /** The state, loaded when not held; null when no such tenant (aliases: no live tenant). */
  resolve(selector: TenantSelector): Promise<TenantState | null>;
  dropLocal(change: AuthInvalidation): void;
}

const keyOf = (s: TenantSelector) => (s.id !== undefined ? `id:${s.id.toLowerCase()}` : `alias:${s.alias.toLowerCase()}`);

export function createTenantStates(deps: { sql: Sql; hub: NotifyHub; cache: { max: number; ttlSecs: number } }): TenantStates {
  const { sql, hub } = deps;
  const { cache, drop } = createIndexedLru<TenantState>({
    max: deps.cache.max, ttl: deps.cache.ttlSecs * 1000, ttlResolution: TTL_RESOLUTION_MS, refsOf: (t) => [t.id],
  });
  // Bumped by every invalidation: a state loaded while one happened is answered but not kept.
  let generation = 0;

  function dropLocal(change: AuthInvalidation): void {
    generation++;
    if (change.all) return cache.clear();
    drop(change.tenants ?? []);
  }
  hub.subscribe(INVALIDATE_TOPIC, (payload) => dropLocal((payload ?? { all: true }) as AuthInvalidation));
  hub.onReconnect(() => dropLocal({ all: true }));

  return {
    peek: (selector) => cache.get(keyOf(selector)),
    async resolve(selector) {
      const key = keyOf(selector);
      const held = cache.get(key);
      if (held !== undefined) return held;
      const before = generation;
      const row = await q.selectTenant(sql, selector.id !== undefined ? { id: selector.id } : { alias: selector.alias });
      if (!row) return null;
      const state: TenantState = { id: row.id, status: row.status };
      if (before === generation && hub.connected) cache.set(key, state);
      return state;
    },
    dropLocal,
  };
}
