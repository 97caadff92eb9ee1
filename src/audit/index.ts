// The audit domain: the non-blocking writer every domain records through, reading the log back, and
// deleting entries past their retention.
export { createAuditWriter, type AuditWriter, type AuditWriterOptions } from './writer.js';
export { auditInsert, insertAuditEvents, type AuditEvent } from './queries.js';
export { createAuditReader, parseAuditFilter, AUDIT_OUTCOMES, type AuditReader } from './service.js';
export { auditGraphqlModule, toAuditLog } from './resolvers.js';
export { registerAuditRoutes } from './export-route.js';
export { createAuditRetention, type AuditRetention, type AuditRetentionSettings } from './retention.js';
