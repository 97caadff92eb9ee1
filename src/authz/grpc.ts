// AuthzService.Check over gRPC: the same runtime, gates and audit as POST /authz/check; answered without a
// promise when the caller's token, the gate and the decision are all cached.
import type * as grpc from '@grpc/grpc-js';
import type { Principal } from '../auth/index.js';
import { callerOf, type Unary, type VerifyToken } from '../grpc/call.js';
import { SNAKE, parseCheck, type CheckRuntime } from './api.js';
import type { Decision } from './types.js';

interface CheckRequest {
  subject_id: string;
  action: string;
  resource_id: string;
  context: Record<string, string>;
  object_kind: string;
  object_id: string;
}

interface CheckResponse {
  allowed: boolean;
  reason: string;
}

const answer = (d: Decision): CheckResponse => ({ allowed: d.allowed, reason: d.reason });

export function authzGrpcService(deps: { runtime: CheckRuntime; verifyToken: VerifyToken; unary: Unary }): grpc.UntypedServiceImplementation {
  const { runtime } = deps;
  return {
    Check: deps.unary<CheckRequest, CheckResponse>('AuthzService.Check', (r, ctx) => {
      const caller = callerOf(ctx.metadata, deps.verifyToken);
      const decide = (p: Principal) => {
        // proto3 has no absent strings: empty means not given. object_kind/object_id win over resource_id
        // (the upstream contract), so resource_id is read only without them. The context map carries strings
        // only; mfa_verified is a boolean everywhere else, so conditions written for HTTP work here too.
        const explicit = r.object_kind !== '';
        let context: Record<string, unknown> | undefined;
        if (Object.keys(r.context).length > 0) {
          context = { ...r.context };
          const mfa = context.mfa_verified;
          if (mfa === 'true' || mfa === 'false') context.mfa_verified = mfa === 'true';
        }
        const check = runtime.prepare(parseCheck({
          subject_id: r.subject_id, action: r.action, resource_id: explicit ? null : r.resource_id || null,
          object_kind: r.object_kind || null, object_id: r.object_id || null, context,
        }, SNAKE));
        const d = runtime.checkPrepared(p, check, null);
        return d instanceof Promise ? d.then(answer) : answer(d);
      };
      return caller instanceof Promise ? caller.then(decide) : decide(caller);
    }),
  };
}
