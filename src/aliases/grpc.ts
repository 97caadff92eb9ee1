// AliasService.ResolveAlias over gRPC: the bearer caller, then the alias service's rules.
import type * as grpc from '@grpc/grpc-js';
import { callerOf, type Unary, type VerifyToken } from '../grpc/call.js';
import type { AliasService } from './service.js';

interface ResolveAliasRequest {
  tenant_id: string;
  tenant_alias: string;
  object_kind: string;
  object_alias: string;
  global: boolean;
}

export function aliasGrpcService(deps: { aliases: AliasService; verifyToken: VerifyToken; unary: Unary }): grpc.UntypedServiceImplementation {
  return {
    ResolveAlias: deps.unary<ResolveAliasRequest, { tenant_id: string; object_id: string }>('AliasService.ResolveAlias', async (r, ctx) => {
      const caller = await callerOf(ctx.metadata, deps.verifyToken);
      ctx.checkpoint();
      const resolved = await deps.aliases.resolve(caller, {
        tenantId: r.tenant_id, tenantAlias: r.tenant_alias, global: r.global, objectKind: r.object_kind, objectAlias: r.object_alias,
      });
      return { tenant_id: resolved.tenantId ?? '', object_id: resolved.objectId };
    }),
  };
}
