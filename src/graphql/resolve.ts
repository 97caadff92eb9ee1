// Resolver wrappers: the authenticated caller first, so domain resolvers are one line each.
import type { GraphQLResolveInfo } from 'graphql';
import type { Principal } from '../auth/principal.js';
import type { GraphqlContext } from './context.js';

export type Args = Record<string, unknown>;

/**
 * A resolver that needs a verified caller (UNAUTHENTICATED 'missing authentication' otherwise). info is
 * passed on for the lists, which read only the item fields a query selects (graphql/selection.ts).
 */
export function authed<T>(fn: (caller: Principal, args: Args, ctx: GraphqlContext, info: GraphQLResolveInfo) => Promise<T> | T) {
  return async (_parent: unknown, args: Args, ctx: GraphqlContext, info: GraphQLResolveInfo): Promise<T> => fn(await ctx.caller(), args, ctx, info);
}
