// GraphQL systemStatus: the health report's details (component messages, pool, keys, rate limits) for
// platform administrators, in camelCase; GET /health keeps the states only for anonymous callers.
import type { Authz } from '../authz/types.js';
import { authed } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { Health } from './service.js';

const PLATFORM = { kind: 'tenant' as const, id: null, tenantId: null };

/** snake_case keys to camelCase, all the way down (the REST body's names are snake_case). */
function camel(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camel);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), camel(v)]));
}

export function healthGraphqlModule(health: Health, authz: Pick<Authz, 'require'>): GraphqlModule {
  return {
    name: 'health',
    sdl: readSdl('health'),
    resolvers: {
      Query: {
        systemStatus: authed(async (p) => {
          await authz.require(p, 'manage', PLATFORM);
          const body = (await health.details()).body;
          const status = camel(body) as { auditRetention?: Record<string, unknown> };
          // lastCleanup is JSON: the event's details as recorded (snake_case, as the upstream UI reads them).
          const retention = body.audit_retention as { last_cleanup?: unknown } | undefined;
          if (status.auditRetention && retention) status.auditRetention.lastCleanup = retention.last_cleanup ?? null;
          return status;
        }),
      },
    },
  };
}
