// The rows of the isolation matrix whose refused callers can still tell one of the target tenant's real
// objects from an id that never existed (the existence-oracle twins of judge.ts): only those SPEC.md forces,
// each with the line that does. Every other operation answers a refused caller the same for both: an id
// that names nothing is answered NOT_FOUND only to a caller who could have read such an object (the kind
// at platform scope, or across the tenant the operation names), and exactly as a real unreadable object
// otherwise (FORBIDDEN 'forbidden'; src/access/guard.ts `missing`, SECURITY.md "Existence of objects").
// This list is a ratchet: a row or caller leaking that is not listed fails the matrix, and so does an
// entry that no longer leaks (remove it). Members of the target are asked only about what they may not know
// exists (judge.ts KNOWN_TO): not their own tenant, nor what a tenant-scope read shows the read-only member.
import type { CallerName } from './world.js';

export const KNOWN_ORACLES: Record<string, CallerName[]> = {
  // SPEC.md "Custom endpoint calls": "1. Lookup by method and path; 404 if absent or not active. 2. Bearer
  // authentication; 401 if missing or invalid. 3. Action check; 403 without execute or manage": the lookup
  // comes before the caller is known, so a path that names no endpoint answers 404 and a real one 401/403.
  'http ANY /api/custom/*': ['anonymous', 'device', 'otherAdmin', 'scopedToken'],
};
