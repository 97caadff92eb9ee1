// GraphQL adapters of the runtime check APIs: authzCheck, authzBulkCheck, authzExplain (INTERFACES.md 1.4).
import { invalidInput, isAppError } from '../errors.js';
import type { GraphqlContext } from '../graphql/context.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import { BULK_MAX, CAMEL, parseCheck, type CheckRuntime, type FieldNames } from './api.js';

/** explain's arguments name the subject entityId (the upstream admin UI's custom-endpoint template). */
const EXPLAIN_ARGS: FieldNames = { ...CAMEL, subjectId: 'entityId' };

type Args = { input: unknown };

export function authzGraphqlModule(runtime: CheckRuntime): GraphqlModule {
  async function check(_: unknown, args: Args, ctx: GraphqlContext) {
    const principal = await ctx.caller();
    const d = await runtime.check(principal, parseCheck(args.input, CAMEL), ctx.requestId);
    return { allowed: d.allowed, reason: d.reason, details: d.details ?? null };
  }

  async function bulk(_: unknown, args: { input: unknown[] }, ctx: GraphqlContext) {
    const principal = await ctx.caller();
    if (args.input.length > BULK_MAX) throw invalidInput(`input must contain at most ${BULK_MAX} items`);
    const out = [];
    for (const item of args.input) {
      try {
        const d = await runtime.check(principal, parseCheck(item, CAMEL), ctx.requestId);
        out.push({ allowed: d.allowed, reason: d.reason, details: d.details ?? null });
      } catch (err) {
        // Each item is gated and validated on its own: one refused question does not sink the rest.
        if (!isAppError(err) || (err.kind !== 'INVALID_INPUT' && err.kind !== 'FORBIDDEN')) throw err;
        out.push({ allowed: false, reason: err.message, details: null });
      }
    }
    return out;
  }

  async function explain(_: unknown, args: Args, ctx: GraphqlContext) {
    const principal = await ctx.caller();
    const e = await runtime.explain(principal, parseCheck(args.input, CAMEL), ctx.requestId);
    return {
      allowed: e.allowed, reason: e.reason, subject: e.subject, resource: e.resource, capability: e.capability,
      matchedBinding: e.matched_binding, evaluatedBindings: e.evaluated_bindings,
    };
  }

  /** explain(entityId, action, resourceId | objectKind + objectId, context): authzExplain with flat arguments and a decision word. */
  async function explainQuery(_: unknown, args: Record<string, unknown>, ctx: GraphqlContext) {
    const principal = await ctx.caller();
    const e = await runtime.explain(principal, parseCheck(args, EXPLAIN_ARGS), ctx.requestId);
    return {
      decision: e.allowed ? 'allow' : 'deny', allowed: e.allowed, reason: e.reason, details: e.details ?? null, subject: e.subject,
      resource: e.resource, capability: e.capability, matchedBinding: e.matched_binding, evaluatedBindings: e.evaluated_bindings,
    };
  }

  const fields = { authzCheck: check, authzBulkCheck: bulk, authzExplain: explain };
  return { name: 'authz', sdl: readSdl('authz'), resolvers: { Query: { ...fields, explain: explainQuery }, Mutation: fields } };
}
