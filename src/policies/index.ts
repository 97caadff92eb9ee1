// The access-model domain (permission blocks, direct policies, actions, guardrail rules): what other domains and the composition root use.
import type { AuditWriter } from '../audit/writer.js';
import type { AuthzService, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import type { JsonBounds } from '../validate.js';
import { createActionService } from './actions.js';
import { createBlockService } from './blocks.js';
import { createDirectPolicyService } from './direct-policies.js';
import { createOrphanPolicies } from './orphans.js';
import type { PolicyServices } from './resolvers.js';
import { createRuleService } from './rules.js';

export { policiesGraphqlModule, type PolicyServices } from './resolvers.js';
export { ANY_READ, createModelGate, POLICY_READ, ROLE_READ, type ModelGate } from './gate.js';
export { blockJson, type BlockRow } from './block-queries.js';
export { toBlock, listOf } from './mapping.js';
export { loadSubject, lookupSubject, reachOf, reachOfRemoved, requireSubjectInTenant, SUBJECT_KINDS, MEMBER_INVALIDATION_CAP, type SubjectKind } from './subjects.js';
export { lockPrincipalGroup, lockPrincipalGroups, memberIds, type SubjectRow } from './subject-queries.js';

export function createPolicyServices(deps: {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
  documents: JsonBounds;
}): PolicyServices {
  return {
    blocks: createBlockService(deps),
    directPolicies: createDirectPolicyService(deps),
    actions: createActionService(deps),
    rules: createRuleService(deps),
    orphans: createOrphanPolicies(deps),
  };
}
