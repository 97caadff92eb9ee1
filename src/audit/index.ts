// The audit domain: the non-blocking writer every domain records through, and reading the log back.
export { createAuditWriter, type AuditWriter, type AuditWriterOptions } from './writer.js';
export { auditInsert, insertAuditEvents, type AuditEvent } from './queries.js';
export { createAuditReader, parseAuditFilter, AUDIT_OUTCOMES, type AuditReader } from './service.js';
export { auditGraphqlModule, toAuditLog } from './resolvers.js';
export { registerAuditRoutes } from './export-route.js';
