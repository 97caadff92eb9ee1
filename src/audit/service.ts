// Reading the audit log: platform readers see global and cross-tenant entries; everyone else only the
// tenants where they hold read on audit_log (never platform entries); another tenant is forbidden.
import type { Principal } from '../auth/principal.js';
import type { Authz } from '../authz/index.js';
import { readableTenants } from '../access/readable-scope.js';
import type { Sql } from '../db/client.js';
import { listingSql, pageOf, type ListResult } from '../db/paging.js';
import { forbidden, invalidInput } from '../errors.js';
import * as v from '../validate.js';
import { auditLogLines, listAuditLogs, plainAuditListing, type AuditFilter, type AuditLogRow } from './log-queries.js';
import type { AuditWriter } from './writer.js';

export const AUDIT_OUTCOMES = ['allow', 'deny', 'error'] as const;
const EXPORT_BATCH = 500;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

export interface AuditReaderDeps {
  sql: Sql;
  /** Generic-plan connections for plain list pages (db/paging.ts listingSql); absent: the shared pool. */
  pages?: Sql;
  authz: Authz;
  audit: AuditWriter;
  lists: { defaultLimit: number; maxLimit: number };
}

type Args = Record<string, unknown> & { limit?: number | null; offset?: number | null };
const given = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null && args[key] !== '';

function timestamp(field: string, value: unknown): Date {
  const ms = typeof value === 'string' && ISO_DATE.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw invalidInput(`${field} must be an ISO 8601 timestamp`);
  return new Date(ms);
}

/** The filters auditLogs and the export share; each bad value names its field. */
export function parseAuditFilter(args: Record<string, unknown>): Omit<AuditFilter, 'visibleTenantIds'> {
  const f: Omit<AuditFilter, 'visibleTenantIds'> = {};
  if (given(args, 'tenantId')) f.tenantId = v.uuid('tenantId', args.tenantId);
  if (given(args, 'actorEntityId')) f.actorEntityId = v.uuid('actorEntityId', args.actorEntityId);
  if (given(args, 'targetKind')) f.targetKind = v.name('targetKind', args.targetKind, 64);
  if (given(args, 'targetId')) f.targetId = v.name('targetId', args.targetId, 255);
  if (given(args, 'event')) f.event = v.name('event', args.event, 128);
  if (given(args, 'outcome')) f.outcome = v.oneOf('outcome', args.outcome, AUDIT_OUTCOMES);
  if (given(args, 'from')) f.from = timestamp('from', args.from);
  if (given(args, 'to')) f.to = timestamp('to', args.to);
  if (f.from && f.to && f.from > f.to) throw invalidInput('from must not be after to');
  return f;
}

export function createAuditReader(deps: AuditReaderDeps) {
  const { sql, authz } = deps;
  const bounds = { defaultLimit: 50, maxLimit: deps.lists.maxLimit };

  /** null: every entry; otherwise the readable tenants (FORBIDDEN when none, or when the one asked for is not). */
  async function visibleTenants(p: Principal, tenantId?: string): Promise<string[] | null> {
    if (await authz.isPlatformAdmin(p)) return null;
    const tenants = await readableTenants({ authz }, p, 'read', 'audit_log', tenantId);
    if (tenants !== null && tenants.length === 0) throw forbidden();
    return tenants;
  }

  return {
    async list(p: Principal, args: Args): Promise<ListResult<AuditLogRow>> {
      const filter = parseAuditFilter(args);
      const f: AuditFilter = { ...filter, visibleTenantIds: await visibleTenants(p, filter.tenantId) };
      return listAuditLogs(listingSql(sql, deps.pages, plainAuditListing(f)), f, pageOf(args, bounds));
    },

    async entityLogs(p: Principal, entityId: unknown, args: Args): Promise<ListResult<AuditLogRow>> {
      const id = v.uuid('entityId', entityId);
      return listAuditLogs(sql, { entityId: id, visibleTenantIds: await visibleTenants(p) }, pageOf(args, bounds));
    },

    /**
     * JSON lines, oldest first, read through a server-side cursor and yielded batch by batch: the HTTP
     * layer writes each chunk as the socket drains, so memory stays flat. Visibility is settled before the
     * first byte (errors after the headers can only cut the connection).
     */
    async exportLines(p: Principal, args: Record<string, unknown>, requestId: string | null = null): Promise<AsyncIterable<string>> {
      const filter = parseAuditFilter(args);
      const visibleTenantIds = await visibleTenants(p, filter.tenantId);
      deps.audit.record({
        event: 'audit_log.export', outcome: 'allow', actorEntityId: p.entityId, tenantId: filter.tenantId ?? null, targetKind: 'audit_log',
        requestId, details: { filters: { ...filter, from: filter.from?.toISOString(), to: filter.to?.toISOString() } },
      });
      const cursor = auditLogLines(sql, { ...filter, visibleTenantIds }, EXPORT_BATCH);
      return (async function* ndjson() {
        for await (const rows of cursor) {
          let chunk = '';
          for (const row of rows) chunk += `${row.line}\n`;
          yield chunk;
        }
      })();
    },
  };
}

export type AuditReader = ReturnType<typeof createAuditReader>;
