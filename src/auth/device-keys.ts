// Device shared-key authentication for the messaging listeners (HTTP `Authorization: Client <key>`,
// MQTT password, CoAP `?auth=`): a bounded LRU keyed by the presented key, dropped by NOTIFY on revoke,
// rotation or entity/tenant change on every instance. Lookups of keys not cached wait out the client
// address's hold, and misses count against it (address-throttle.ts).
import type { Sql } from '../db/client.js';
import type { AddressThrottle } from './address-throttle.js';
import type { NotifyHub } from '../db/notify-hub.js';
import { createIndexedLru } from '../indexed-lru.js';
import * as cq from './credential-queries.js';
import type { EntityKind, Principal } from './principal.js';
import type { KeyedHash } from './secrets.js';
import { INVALIDATE_TOPIC, TTL_RESOLUTION_MS, type AuthInvalidation } from './verifier.js';

export interface DeviceIdentity {
  entityId: string;
  /** The entity's owning tenant (null for global entities). */
  tenantId: string | null;
  kind: EntityKind;
  /** The entity's status: listeners refuse anything but 'active' (authorization would too). */
  status: string;
  credentialId: string;
}

/** The client presenting a key: its peer address, read only when the key is not cached (no cost on a hit). */
export interface ClientPeer {
  readonly ip: string;
}

interface Entry {
  identity: DeviceIdentity;
  expiresAt: number | null;
}

export interface DeviceKeys {
  /** `from`: the client; null or absent for the service's own re-checks of keys it holds (not throttled). */
  authenticate(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null>;
  /** The identity of a key this instance verified and still holds, synchronously; undefined otherwise (then authenticate). */
  peek(key: string): DeviceIdentity | undefined;
  dropLocal(change: AuthInvalidation): void;
  readonly stats: { hits: number; misses: number; size: number };
}

export function principalOfDevice(d: DeviceIdentity): Principal {
  return {
    entityId: d.entityId, entityKind: d.kind, homeTenantId: d.tenantId, tenantId: d.tenantId,
    sessionId: null, credentialId: d.credentialId, credentialKind: 'shared_key', scoped: false,
  };
}

export function createDeviceKeys(deps: {
  sql: Sql; hub: NotifyHub; hash: () => KeyedHash; cache: { max: number; ttlSecs: number }; markUsed: (credentialId: string) => void;
  failures: AddressThrottle;
}): DeviceKeys {
  const { sql, hub } = deps;
  const { cache, drop } = createIndexedLru<Entry>({
    max: deps.cache.max, ttl: deps.cache.ttlSecs * 1000, ttlResolution: TTL_RESOLUTION_MS,
    refsOf: ({ identity: d }) => (d.tenantId === null ? [d.credentialId, d.entityId] : [d.credentialId, d.entityId, d.tenantId]),
  });
  let generation = 0;
  let hits = 0;
  let misses = 0;

  function dropLocal(change: AuthInvalidation): void {
    generation++;
    if (change.all) return cache.clear();
    drop([...(change.credentials ?? []), ...(change.entities ?? []), ...(change.tenants ?? [])]);
  }

  hub.subscribe(INVALIDATE_TOPIC, (payload) => dropLocal((payload ?? { all: true }) as AuthInvalidation));
  hub.onReconnect(() => dropLocal({ all: true }));

  function peek(key: string): DeviceIdentity | undefined {
    // Keyed by the key itself, as the bearer cache keeps whole tokens: a hit is exact string equality and
    // costs no keyed hash (the largest per-publish cost otherwise). The hash is computed only to look a
    // key up in the database, which stores nothing else.
    const cached = cache.get(key);
    if (cached === undefined) return undefined;
    if (cached.expiresAt !== null && cached.expiresAt <= Date.now()) {
      cache.delete(key);
      return undefined;
    }
    hits++;
    deps.markUsed(cached.identity.credentialId);
    return cached.identity;
  }

  return {
    peek,
    async authenticate(key, from) {
      if (!key || key.length > 256) {
        if (from) deps.failures.failed(from.ip);
        return null;
      }
      const known = peek(key);
      if (known !== undefined) return known;
      misses++;
      // The address is read only here, past the cache: a hit costs nothing more than before.
      const ip = from ? from.ip : null;
      if (from) await deps.failures.hold(ip);
      const before = generation;
      const row = await cq.selectSharedKeyState(sql, deps.hash()(key));
      if (!row || row.status !== 'active' || row.expired || row.entity_deleted || row.home_tenant_status === 'deleted') {
        if (from) deps.failures.failed(ip);
        return null;
      }
      const identity: DeviceIdentity = {
        entityId: row.entity_id, tenantId: row.home_tenant_id, kind: row.entity_kind, status: row.entity_status, credentialId: row.id,
      };
      if (before === generation && hub.connected) cache.set(key, { identity, expiresAt: row.expires_at ? row.expires_at.getTime() : null });
      deps.markUsed(row.id);
      return identity;
    },
    dropLocal,
    get stats() {
      return { hits, misses, size: cache.size };
    },
  };
}
