// GET /audit/export on the management listener: the audit log as JSON lines (application/x-ndjson),
// streamed from a database cursor with the same visibility rules as the auditLogs query.
import { bearerCaller, type BearerAuthentication } from '../auth/bearer.js';
import type { HttpServer } from '../http/server.js';
import { searchParams } from '../http/types.js';
import type { AuditReader } from './service.js';

const EXPORT_FILTERS = ['tenantId', 'from', 'to', 'event', 'outcome', 'actorEntityId', 'targetKind', 'targetId'];

export function registerAuditRoutes(server: HttpServer, deps: { reader: AuditReader; auth: BearerAuthentication }): void {
  server.route('GET', '/audit/export', async (req) => {
    const principal = await bearerCaller(req.headers, deps.auth);
    const params = searchParams(req);
    const args: Record<string, unknown> = {};
    for (const name of EXPORT_FILTERS) {
      const value = params.get(name);
      if (value !== null) args[name] = value;
    }
    const body = await deps.reader.exportLines(principal, args, req.requestId);
    return { status: 200, headers: { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' }, body };
  });
}
