// AuthService over gRPC: Authenticate (a token in the request, no metadata) and AuthenticateCredential
// (a bearer caller with authz.check on the tenant involved, or at platform scope, checks someone else's
// password or shared key). Both answer from the verified-token and device-key caches when they can.
import type * as grpc from '@grpc/grpc-js';
import { unauthenticated } from '../errors.js';
import { callerOf, principalOf, type Unary, type VerifyToken } from '../grpc/call.js';
import type { Admit, CredentialMatch, CredentialRequest } from './credential-check.js';
import type { Principal } from './principal.js';

interface AuthenticateResponse {
  entity_id: string;
  tenant_id: string;
  session_id: string;
}

interface CredentialBody {
  identifier: string;
  secret: string;
  kind: string;
  tenant_id: string;
  tenant_alias: string;
}

interface CredentialResponse {
  entity_id: string;
  tenant_id: string;
  credential_id: string;
}

export interface AuthGrpcDeps {
  verifyToken: VerifyToken;
  authenticateCredential(req: CredentialRequest, caller: Principal, admit: Admit, checkpoint: () => void, peer: string | null): CredentialMatch | Promise<CredentialMatch>;
  /** The runtime caller gate (authz.check, policy.manage or manage on the tenant, or at platform scope). */
  admit: Admit;
  unary: Unary;
}

const identityOf = (p: Principal): AuthenticateResponse => ({
  // The session's tenant context when it has one, else the entity's own tenant.
  entity_id: p.entityId, tenant_id: p.tenantId ?? p.homeTenantId ?? '', session_id: p.sessionId ?? '',
});

const matchOf = (m: CredentialMatch): CredentialResponse => ({ entity_id: m.entityId, tenant_id: m.tenantId ?? '', credential_id: m.credentialId });

export function authGrpcService(deps: AuthGrpcDeps): grpc.UntypedServiceImplementation {
  const { verifyToken, admit, unary } = deps;
  return {
    Authenticate: unary<{ token: string }, AuthenticateResponse>('AuthService.Authenticate', (req) => {
      const token = req.token.trim();
      if (!token) throw unauthenticated('token is required');
      const verdict = verifyToken(token);
      return verdict instanceof Promise ? verdict.then((v) => identityOf(principalOf(v))) : identityOf(principalOf(verdict));
    }),
    AuthenticateCredential: unary<CredentialBody, CredentialResponse>('AuthService.AuthenticateCredential', (body, ctx) => {
      const req: CredentialRequest = { identifier: body.identifier, secret: body.secret, kind: body.kind, tenantId: body.tenant_id, tenantAlias: body.tenant_alias };
      const check = (caller: Principal) => {
        const match = deps.authenticateCredential(req, caller, admit, ctx.checkpoint, ctx.address());
        return match instanceof Promise ? match.then(matchOf) : matchOf(match);
      };
      const caller = callerOf(ctx.metadata, verifyToken);
      return caller instanceof Promise ? caller.then(check) : check(caller);
    }),
  };
}
