// expiringCredentials (the admin UI's risk panel, INTERFACES.md 1.5): active credentials of live entities
// whose expiry falls within the next `days` days, soonest first. Platform administrators only. Every kind
// is a credentials row, certificates included, so they appear here as they are issued.
import type { Authz } from '../authz/types.js';
import type { Sql } from '../db/client.js';
import { pageOf } from '../db/paging.js';
import { forbidden, invalidInput } from '../errors.js';
import * as v from '../validate.js';
import * as cq from './credential-queries.js';
import { credentialOutput } from './credentials.js';
import type { Principal } from './principal.js';

export const CREDENTIAL_KINDS = ['password', 'access_token', 'certificate', 'shared_key'] as const;
const DEFAULT_DAYS = 30;
const MAX_DAYS = 36_500;
const DEFAULT_LIMIT = 50;

export interface ExpiringArgs {
  days?: number | null;
  entityId?: unknown;
  kind?: unknown;
  limit?: number | null;
  offset?: number | null;
}

export function createExpiringCredentials(deps: { sql: Sql; authz: Authz; lists: { maxLimit: number } }) {
  return async function expiringCredentials(p: Principal, args: ExpiringArgs) {
    // Platform manage; scoped tokens are never platform administrators.
    if (!(await deps.authz.isPlatformAdmin(p))) throw forbidden();
    const days = args.days ?? DEFAULT_DAYS;
    if (!Number.isInteger(days) || days < 0 || days > MAX_DAYS) throw invalidInput(`days must be an integer from 0 to ${MAX_DAYS}`);
    const filter: cq.ExpiringFilter = { days };
    if (args.entityId !== undefined && args.entityId !== null) filter.entityId = v.uuid('entityId', args.entityId);
    if (args.kind !== undefined && args.kind !== null) filter.kind = v.oneOf('kind', args.kind, CREDENTIAL_KINDS);
    const page = pageOf({ limit: args.limit ?? DEFAULT_LIMIT, offset: args.offset }, { defaultLimit: DEFAULT_LIMIT, maxLimit: deps.lists.maxLimit });
    return (await cq.listExpiring(deps.sql, filter, page)).map(credentialOutput);
  };
}

export type ExpiringCredentials = ReturnType<typeof createExpiringCredentials>;
