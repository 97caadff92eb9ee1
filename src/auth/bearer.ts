// The bearer caller of an HTTP route outside GraphQL (/authz/*, /audit/export): 401 with what was wrong,
// and no promise at all when this instance verified the token already (the /authz/check hot path).
import { unauthenticated } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import type { Principal } from './principal.js';

/** The caller behind a bearer token this instance has verified and cached; undefined when not known at once. */
export type PeekBearer = (headers: Record<string, string>) => Principal | undefined;

export interface BearerAuthentication {
  authenticate: Authenticate;
  peek: PeekBearer;
}

export function bearerCaller(headers: Record<string, string>, auth: BearerAuthentication): Principal | Promise<Principal> {
  const header = headers.authorization;
  if (header === undefined || header === '') throw unauthenticated('missing Authorization header');
  if (header.length < 7 || header.slice(0, 7).toLowerCase() !== 'bearer ') throw unauthenticated('expected Bearer token');
  const known = auth.peek(headers);
  if (known !== undefined) return known;
  return auth.authenticate(headers).then((principal) => {
    if (!principal) throw unauthenticated('invalid or expired token');
    return principal;
  });
}
