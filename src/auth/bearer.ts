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

/** `Bearer ` in any case. A prefix test and a slice, not a regex: this runs on every authenticated request. */
function hasBearerScheme(header: string): boolean {
  return header.length >= 7 && (header.startsWith('Bearer ') || header.slice(0, 7).toLowerCase() === 'bearer ');
}

/** The token of `Bearer <token>`, null for anything else (another scheme, or no token). */
export function bearerToken(header: string): string | null {
  if (!hasBearerScheme(header)) return null;
  const token = header.slice(7).trim();
  return token.length === 0 ? null : token;
}

export function bearerCaller(headers: Record<string, string>, auth: BearerAuthentication): Principal | Promise<Principal> {
  const header = headers.authorization;
  if (header === undefined || header === '') throw unauthenticated('missing Authorization header');
  if (!hasBearerScheme(header)) throw unauthenticated('expected Bearer token');
  const known = auth.peek(headers);
  if (known !== undefined) return known;
  return auth.authenticate(headers).then((principal) => {
    if (!principal) throw unauthenticated('invalid or expired token');
    return principal;
  });
}
