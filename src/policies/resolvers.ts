// GraphQL for permission blocks, direct policies, actions, applicability and guardrail rules: plumbing only.
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { ActionService } from './actions.js';
import type { BlockService } from './blocks.js';
import type { DirectPolicyService } from './direct-policies.js';
import { listOf, toAction, toApplicabilityEntry, toBlock, toDirectPolicy, toRule } from './mapping.js';
import type { OrphanPolicies } from './orphans.js';
import type { RuleService } from './rules.js';

export interface PolicyServices {
  blocks: BlockService;
  directPolicies: DirectPolicyService;
  actions: ActionService;
  rules: RuleService;
  orphans: OrphanPolicies;
}

export function policiesGraphqlModule(s: PolicyServices): GraphqlModule {
  return {
    name: 'policies',
    sdl: readSdl('policies'),
    resolvers: {
      Query: {
        permissionBlocks: authed(async (p, a) => listOf(await s.blocks.list(p, a), toBlock)),
        permissionBlock: authed(async (p, a) => toBlock(await s.blocks.get(p, a.id))),
        directPolicies: authed(async (p, a) => listOf(await s.directPolicies.list(p, a), toDirectPolicy)),
        actions: authed(async (p, a) => listOf(await s.actions.list(p, a), toAction)),
        action: authed(async (p, a) => toAction(await s.actions.get(p, a.id))),
        actionApplicability: authed(async (p, a) => listOf(await s.actions.applicability(p, a), toApplicabilityEntry)),
        actionAssignmentRules: authed(async (p, a) => listOf(await s.rules.list(p, a), toRule)),
        orphanPolicies: authed((p, a) => s.orphans(p, a)),
      },
      Mutation: {
        createPermissionBlock: authed(async (p, a, ctx) => toBlock(await s.blocks.create(p, a.input as Args, ctx.requestId))),
        deletePermissionBlock: authed((p, a, ctx) => s.blocks.remove(p, a.id, ctx.requestId)),
        createDirectPolicy: authed(async (p, a, ctx) => toDirectPolicy(await s.directPolicies.create(p, a.input as Args, ctx.requestId))),
        deleteDirectPolicy: authed((p, a, ctx) => s.directPolicies.remove(p, a.id, ctx.requestId)),
        createAction: authed(async (p, a, ctx) => toAction(await s.actions.create(p, a.input as Args, ctx.requestId))),
        updateAction: authed(async (p, a, ctx) => toAction(await s.actions.update(p, a.id, a.input as Args, ctx.requestId))),
        deleteAction: authed((p, a, ctx) => s.actions.remove(p, a.id, ctx.requestId)),
        addActionApplicability: authed(async (p, a, ctx) => toApplicabilityEntry(await s.actions.addApplicability(p, a.input as Args, ctx.requestId))),
        removeActionApplicability: authed((p, a, ctx) => s.actions.removeApplicability(p, a.input as Args, ctx.requestId)),
        createActionAssignmentRule: authed(async (p, a, ctx) => toRule(await s.rules.create(p, a.input as Args, ctx.requestId))),
        deleteActionAssignmentRule: authed((p, a, ctx) => s.rules.remove(p, a.id, ctx.requestId)),
      },
    },
  };
}
