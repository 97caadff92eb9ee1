// Audit of the runtime check APIs: every denial and explain call is written; allowed checks are written
// one by one or, by default, counted per tenant and action and written as one summary row per window.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Decision, ObjectRef } from './types.js';

export interface CheckAudit {
  recordCheck(principal: Principal, subjectId: string, action: string, object: ObjectRef, objectTenantId: string | null, decision: Decision, requestId: string | null, event?: string): void;
  /** Runtime checks answered (event authz.check), by outcome: plain numbers the metrics read. */
  readonly tally: { allowed: number; denied: number };
  /** Writes the pending summary now (shutdown, tests). */
  flush(): void;
  close(): void;
}

export function createCheckAudit(audit: AuditWriter, settings: { auditAllowed: 'summary' | 'all'; auditSummarySecs: number }): CheckAudit {
  // tenant ('' = platform) -> action -> count
  let counts = new Map<string, Map<string, number>>();
  let windowStart = Date.now();
  const tally = { allowed: 0, denied: 0 };

  function flush(): void {
    if (counts.size === 0) return;
    const current = counts;
    counts = new Map();
    const windowSecs = Math.round((Date.now() - windowStart) / 1000);
    windowStart = Date.now();
    for (const [tenant, byAction] of current) {
      let total = 0;
      const actions: Record<string, number> = {};
      for (const [action, n] of byAction) {
        actions[action] = n;
        total += n;
      }
      audit.record({ event: 'authz.check.summary', outcome: 'allow', tenantId: tenant || null, details: { window_secs: windowSecs, allowed_checks: total, by_action: actions } });
    }
  }

  const timer = setInterval(flush, settings.auditSummarySecs * 1000);
  timer.unref();

  return {
    tally,
    recordCheck(principal, subjectId, action, object, objectTenantId, decision, requestId, event = 'authz.check') {
      if (event === 'authz.check') {
        if (decision.allowed) tally.allowed++;
        else tally.denied++;
      }
      if (decision.allowed && settings.auditAllowed === 'summary' && event === 'authz.check') {
        const tenant = objectTenantId ?? '';
        let byAction = counts.get(tenant);
        if (!byAction) counts.set(tenant, (byAction = new Map()));
        byAction.set(action, (byAction.get(action) ?? 0) + 1);
        return;
      }
      const details: Record<string, unknown> = {
        action,
        subject_id: subjectId,
        resource_id: object.kind === 'resource' ? object.id : null,
        object_kind: object.kind,
        object_id: object.id,
        reason: decision.reason,
      };
      const status = decision.details?.tenant_status;
      if (status !== undefined) details.tenant_status = status;
      if (decision.blockIds.length) details.block_ids = decision.blockIds;
      audit.record({
        event,
        outcome: decision.allowed ? 'allow' : 'deny',
        actorEntityId: principal.entityId,
        tenantId: (decision.details?.tenant_id as string | undefined) ?? objectTenantId,
        targetKind: object.kind,
        targetId: object.id,
        details,
        requestId,
      });
    },
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}
