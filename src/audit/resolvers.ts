// GraphQL for reading the audit log: argument plumbing only; visibility lives in service.ts.
import { iso } from '../graphql/mapping.js';
import { authed } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { AuditLogRow } from './log-queries.js';
import type { AuditReader } from './service.js';

export function toAuditLog(row: AuditLogRow) {
  return {
    id: row.id,
    actorEntityId: row.actor_entity_id,
    tenantId: row.tenant_id,
    targetKind: row.target_kind,
    targetId: row.target_id,
    event: row.event,
    outcome: row.outcome,
    details: row.details ?? {},
    requestId: row.request_id,
    createdAt: iso(row.created_at),
  };
}

const toList = (page: { total: number; items: AuditLogRow[] }) => ({ total: page.total, items: page.items.map(toAuditLog) });

export function auditGraphqlModule(reader: AuditReader): GraphqlModule {
  return {
    name: 'audit',
    sdl: readSdl('audit'),
    resolvers: {
      Query: {
        auditLogs: authed(async (p, a) => toList(await reader.list(p, a))),
        entityAuditLogs: authed(async (p, a) => toList(await reader.entityLogs(p, a.entityId, a))),
      },
    },
  };
}
