// AuthzService.Check over gRPC: the same runtime, gates and audit as POST /authz/check.
import type * as grpc from '@grpc/grpc-js';
import { unauthenticated } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import { headersOf, toGrpcError } from '../grpc/server.js';
import type { Logger } from '../log.js';
import { SNAKE, parseCheck, type CheckRuntime } from './api.js';

interface CheckRequest {
  subject_id: string;
  action: string;
  resource_id: string;
  context: Record<string, string>;
  object_kind: string;
  object_id: string;
}

export function authzGrpcService(deps: { runtime: CheckRuntime; authenticate: Authenticate; log: Logger }): grpc.UntypedServiceImplementation {
  return {
    Check(call: grpc.ServerUnaryCall<CheckRequest, unknown>, callback: grpc.sendUnaryData<{ allowed: boolean; reason: string }>) {
      void (async () => {
        const headers = headersOf(call);
        if (!headers.authorization) throw unauthenticated('missing authorization metadata');
        const principal = await deps.authenticate(headers);
        if (!principal) throw unauthenticated('invalid or expired token');
        const r = call.request;
        // proto3 has no absent strings: empty means not given. The context map carries strings only;
        // mfa_verified is a boolean everywhere else, so conditions written for HTTP work here too.
        const context: Record<string, unknown> = { ...r.context };
        if (context.mfa_verified === 'true' || context.mfa_verified === 'false') context.mfa_verified = context.mfa_verified === 'true';
        const input = parseCheck({
          subject_id: r.subject_id, action: r.action, resource_id: r.resource_id || null, object_kind: r.object_kind || null,
          object_id: r.object_id || null, context: Object.keys(context).length ? context : undefined,
        }, SNAKE);
        const d = await deps.runtime.check(principal, input, null);
        callback(null, { allowed: d.allowed, reason: d.reason });
      })().catch((err: unknown) => callback(toGrpcError(err, deps.log, 'AuthzService.Check')));
    },
  };
}
