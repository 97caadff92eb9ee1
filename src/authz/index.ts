// The authorization domain's public surface: the only module other domains import from.
export { OBJECT_KINDS } from './types.js';
export type { Authz, AuthorizeRequest, Decision, Invalidation, ObjectKind, ObjectRef } from './types.js';
export { createAuthz, INVALIDATE_TOPIC, type AuthzService, type AuthzSettings } from './service.js';
export { createTenantAdminRole, tenantAdminBlocks, TENANT_ADMIN_ROLE, TENANT_ADMIN_DESCRIPTION, type TenantAdminRole } from './tenant-admin.js';
export {
  evaluateGuardrail, pairsOfBlock, GUARDRAIL_CODE,
  type BlockSpec, type GrantCheck, type GrantPair, type GrantSubject, type GuardrailResult, type Override, type Verdict,
} from './guardrails.js';
export { validateConditions, isReferencable, OPERATORS } from './conditions.js';
export { SCOPE_MODES, type ScopeMode } from './model.js';
export type { Explanation, Binding } from './explain.js';
export { createCheckRuntime, type CheckRuntime } from './api.js';
export { registerAuthzRoutes } from './routes.js';
export { authzGraphqlModule } from './resolvers.js';
export { authzGrpcService } from './grpc.js';
