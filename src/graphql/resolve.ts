// Resolver wrappers: the authenticated caller first, so domain resolvers are one line each.
import type { Principal } from '../auth/principal.js';
import type { GraphqlContext } from './context.js';

export type Args = Record<string, unknown>;

/** A resolver that needs a verified caller (UNAUTHENTICATED 'missing authentication' otherwise). */
export function authed<T>(fn: (caller: Principal, args: Args, ctx: GraphqlContext) => Promise<T> | T) {
  return async (_parent: unknown, args: Args, ctx: GraphqlContext): Promise<T> => fn(await ctx.caller(), args, ctx);
}
