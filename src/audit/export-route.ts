// GET /audit/export on the management listener: the audit log as JSON lines (application/x-ndjson),
// streamed from a database cursor with the same visibility rules as the auditLogs query.
import type { Principal } from '../auth/principal.js';
import { unauthenticated } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import type { HttpServer } from '../http/server.js';
import { searchParams, type HttpRequest } from '../http/types.js';
import type { AuditReader } from './service.js';

const EXPORT_FILTERS = ['tenantId', 'from', 'to', 'event', 'outcome', 'actorEntityId', 'targetKind', 'targetId'];

async function callerOf(req: HttpRequest, authenticate: Authenticate): Promise<Principal> {
  const header = req.headers.authorization;
  if (header === undefined || header === '') throw unauthenticated('missing Authorization header');
  if (!/^bearer /i.test(header)) throw unauthenticated('expected Bearer token');
  const principal = await authenticate(req.headers, req.ip);
  if (!principal) throw unauthenticated('invalid or expired token');
  return principal;
}

export function registerAuditRoutes(server: HttpServer, deps: { reader: AuditReader; authenticate: Authenticate }): void {
  server.route('GET', '/audit/export', async (req) => {
    const principal = await callerOf(req, deps.authenticate);
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
