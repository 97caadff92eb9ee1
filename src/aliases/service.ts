// Alias resolution (gRPC AliasService.ResolveAlias): exactly one namespace (a tenant by id or alias, or
// the global one), an entity or resource alias in it, its UUID out. Resolving grants nothing, but it does
// reveal what exists, so the caller needs the runtime gate on that tenant (authz.check, policy.manage or
// manage there or at platform scope; the global namespace: at platform scope): one tenant's adapter
// cannot map another tenant's aliases. Unknown tenants look forbidden to callers without platform reach.
import type { Principal } from '../auth/index.js';
import type { Sql } from '../db/client.js';
import { invalidInput, notFound } from '../errors.js';
import { isUuid } from '../validate.js';
import * as q from './queries.js';

export interface AliasRequest {
  /** Empty strings mean not given (proto3). */
  tenantId: string;
  tenantAlias: string;
  global: boolean;
  objectKind: string;
  objectAlias: string;
}

export interface ResolvedAlias {
  tenantId: string | null;
  objectId: string;
}

export type Admit = (caller: Principal, tenantId: string | null) => void | Promise<void>;

const MAX_ALIAS = 256;

function parse(req: AliasRequest) {
  const tenantId = req.tenantId.trim();
  const tenantAlias = req.tenantAlias.trim();
  const selectors = [tenantId !== '', tenantAlias !== '', req.global].filter(Boolean).length;
  if (selectors !== 1) throw invalidInput('exactly one of tenant_id, tenant_alias, global must be set');
  if (tenantId && !isUuid(tenantId)) throw invalidInput('tenant_id must be a UUID');
  const kind = req.objectKind.trim().toLowerCase();
  if (kind !== 'entity' && kind !== 'resource') throw invalidInput("object_kind must be 'entity' or 'resource'");
  const alias = req.objectAlias.trim();
  if (!alias) throw invalidInput('object_alias is required');
  if (alias.length > MAX_ALIAS || tenantAlias.length > MAX_ALIAS) throw invalidInput(`aliases are at most ${MAX_ALIAS} characters`);
  return { tenantId, tenantAlias, kind: kind as 'entity' | 'resource', alias };
}

export function createAliasService(deps: { sql: Sql; admit: Admit }) {
  const { sql, admit } = deps;
  return {
    async resolve(caller: Principal, req: AliasRequest): Promise<ResolvedAlias> {
      const p = parse(req);
      let tenantId: string | null = null;
      if (!req.global) {
        const tenant = await q.selectLiveTenant(sql, p.tenantId ? { id: p.tenantId } : { alias: p.tenantAlias });
        if (!tenant) {
          await admit(caller, null);
          throw notFound('tenant');
        }
        tenantId = tenant.id;
      }
      await admit(caller, tenantId);
      const objectId = await q.selectObjectByAlias(sql, p.kind, tenantId, p.alias);
      if (!objectId) throw notFound(`${p.kind} alias`);
      return { tenantId, objectId };
    },
  };
}

export type AliasService = ReturnType<typeof createAliasService>;
