// The runtime check APIs' shared core (HTTP, GraphQL, gRPC): input validation, the caller gates
// (self, or authz.check|policy.manage|manage on the object's tenant or platform), audit.
import type { Principal } from '../auth/principal.js';
import { forbidden, invalidInput } from '../errors.js';
import { isUuid } from '../validate.js';
import type { Explanation } from './explain.js';
import type { AuthzService } from './service.js';
import { OBJECT_KINDS, type AuthorizeRequest, type Decision, type ObjectKind, type ObjectRef } from './types.js';

export const BULK_MAX = 20;
const KINDS: ReadonlySet<string> = new Set(OBJECT_KINDS);
const GATE_ACTIONS = ['authz.check', 'policy.manage', 'manage'] as const;
const EXPLAIN_ACTIONS = ['policy.manage', 'manage'] as const;
const PLATFORM: ObjectRef = Object.freeze({ kind: 'tenant', id: null, tenantId: null });

export interface CheckInput {
  subjectId: string;
  action: string;
  object: ObjectRef;
  context: Record<string, unknown> | undefined;
}

/** Field names as the caller spelled them, for error messages that name what was wrong. */
export interface FieldNames {
  subjectId: string;
  action: string;
  resourceId: string;
  objectKind: string;
  objectId: string;
  tenantId: string;
}
export const SNAKE: FieldNames = { subjectId: 'subject_id', action: 'action', resourceId: 'resource_id', objectKind: 'object_kind', objectId: 'object_id', tenantId: 'tenant_id' };
export const CAMEL: FieldNames = { subjectId: 'subjectId', action: 'action', resourceId: 'resourceId', objectKind: 'objectKind', objectId: 'objectId', tenantId: 'tenantId' };

const isBlank = (v: unknown) => v === undefined || v === null || v === '';

function optionalString(v: unknown, name: string): string | null {
  if (isBlank(v)) return null;
  if (typeof v !== 'string') throw invalidInput(`${name} must be a string`);
  return v;
}

/** resource_id, or object_kind with object_id (or with tenant_id / nothing: the kind as a whole); 'platform' = platform scope. */
export function parseObject(raw: Record<string, unknown>, f: FieldNames): ObjectRef {
  const resourceId = optionalString(raw[f.resourceId], f.resourceId);
  const kind = optionalString(raw[f.objectKind], f.objectKind);
  const objectId = optionalString(raw[f.objectId], f.objectId);
  const tenantId = optionalString(raw[f.tenantId], f.tenantId);
  if (resourceId !== null) {
    if (kind !== null && kind !== 'resource') throw invalidInput(`${f.resourceId} cannot be combined with ${f.objectKind} '${kind}'`);
    if (objectId !== null && objectId !== resourceId) throw invalidInput(`give either ${f.resourceId} or ${f.objectId}, not both`);
    return { kind: 'resource', id: resourceId };
  }
  if (kind === null) {
    if (objectId !== null) throw invalidInput(`${f.objectId} needs ${f.objectKind}`);
    throw invalidInput(`${f.resourceId} or ${f.objectKind} is required`);
  }
  if (kind === 'platform') {
    if (objectId !== null || tenantId !== null) throw invalidInput(`${f.objectKind} 'platform' takes no ${f.objectId} or ${f.tenantId}`);
    return PLATFORM;
  }
  if (!KINDS.has(kind)) throw invalidInput(`unknown ${f.objectKind} '${kind}'; expected one of ${OBJECT_KINDS.join(', ')}, platform`);
  if (objectId !== null) return { kind: kind as ObjectKind, id: objectId };
  if (tenantId !== null && !isUuid(tenantId)) throw invalidInput(`${f.tenantId} must be a UUID`);
  return { kind: kind as ObjectKind, id: null, tenantId };
}

export function parseContext(v: unknown): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidInput('context must be a JSON object');
  return v as Record<string, unknown>;
}

export function parseSubject(v: unknown, f: FieldNames): string {
  if (typeof v !== 'string' || v === '') throw invalidInput(`${f.subjectId} is required`);
  if (!isUuid(v)) throw invalidInput(`${f.subjectId} must be a UUID`);
  return v;
}

export function parseAction(v: unknown, f: FieldNames): string {
  if (typeof v !== 'string' || v === '') throw invalidInput(`${f.action} is required`);
  return v;
}

export function parseCheck(raw: unknown, f: FieldNames): CheckInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalidInput('request body must be a JSON object');
  const body = raw as Record<string, unknown>;
  return { subjectId: parseSubject(body[f.subjectId], f), action: parseAction(body[f.action], f), object: parseObject(body, f), context: parseContext(body.context) };
}

export function parseActions(v: unknown): string[] {
  if (!Array.isArray(v)) throw invalidInput('actions must be an array of action names');
  if (v.length === 0) throw invalidInput('actions must contain at least one item');
  if (v.length > BULK_MAX) throw invalidInput(`actions must contain at most ${BULK_MAX} items`);
  if (v.some((a) => typeof a !== 'string' || a === '')) throw invalidInput('actions must be non-empty strings');
  return v as string[];
}

/**
 * A parsed check with the decision memo key of its usual form (about another subject, under no token
 * ceiling) built once. A caller that sees the same check again (the HTTP route keeps them per request
 * body) neither parses it nor builds and hashes its key again.
 */
export interface PreparedCheck {
  readonly input: CheckInput;
  readonly key: string;
}

export interface CheckRuntime {
  check(principal: Principal, input: CheckInput, requestId: string | null): Promise<Decision>;
  prepare(input: CheckInput): PreparedCheck;
  /**
   * check for a prepared input: the decision itself, with no promise, when everything it needs is
   * memoised (the hot path writes its reply from the request's own callback); a promise otherwise.
   */
  checkPrepared(principal: Principal, check: PreparedCheck, requestId: string | null): Decision | Promise<Decision>;
  bulk(principal: Principal, input: Omit<CheckInput, 'action'> & { actions: string[] }, requestId: string | null): Promise<Record<string, { allowed: boolean; reason: string }>>;
  explain(principal: Principal, input: CheckInput, requestId: string | null): Promise<Explanation>;
  /**
   * The caller gate alone, for runtime APIs that ask about a tenant's objects without a check (gRPC
   * AuthenticateCredential, ResolveAlias): authz.check, policy.manage or manage on the tenant or at
   * platform scope (tenantId null: platform only). Nothing (no promise) when a memoised allow settles it;
   * else a promise that rejects FORBIDDEN.
   */
  admitCaller(principal: Principal, tenantId: string | null): void | Promise<void>;
}

export function createCheckRuntime(authz: AuthzService): CheckRuntime {
  /** Any of the actions at one scope. */
  async function gateAt(principal: Principal, scope: ObjectRef, actions: readonly string[]): Promise<boolean> {
    for (const action of actions) if ((await authz.decide(principal, action, scope)).allowed) return true;
    return false;
  }

  /** Any of the actions at the tenant's scope (when there is one) or at platform scope. */
  async function gate(principal: Principal, tenantId: string | null, actions: readonly string[]): Promise<boolean> {
    return (tenantId !== null && (await gateAt(principal, { kind: 'tenant', id: tenantId }, actions))) || gateAt(principal, PLATFORM, actions);
  }

  interface Admitted {
    tenantId: string | null;
    ceiling: string | null;
    /** Set when the caller is confined to this tenant: other tenants' subjects read as unknown ones. */
    subjectVisibleIn?: string;
  }

  /**
   * Asking about yourself needs nothing; a scoped token's ceiling then narrows the answer. A caller whose
   * gate holds in the object's tenant only sees that tenant's subjects and global ones: another tenant's
   * subject is answered exactly like one that does not exist (no existence or status oracle).
   */
  async function admit(principal: Principal, subjectId: string, object: ObjectRef): Promise<Admitted> {
    const { tenantId } = await authz.objectTenant(object);
    if (subjectId === principal.entityId) {
      return { tenantId, ceiling: principal.scoped ? (principal.credentialId ?? 'missing-credential') : null };
    }
    if (tenantId !== null && (await gateAt(principal, { kind: 'tenant', id: tenantId }, GATE_ACTIONS))) {
      const subject = await authz.engine.subject(subjectId);
      const foreign = subject !== null && subject.tenantId !== null && subject.tenantId !== tenantId;
      if (foreign && !(await gateAt(principal, PLATFORM, GATE_ACTIONS))) return { tenantId, ceiling: null, subjectVisibleIn: tenantId };
      return { tenantId, ceiling: null };
    }
    if (!(await gateAt(principal, PLATFORM, GATE_ACTIONS))) throw forbidden();
    return { tenantId, ceiling: null };
  }

  function request(input: CheckInput, action: string, ceiling: string | null, visibleIn?: string): AuthorizeRequest {
    const r: AuthorizeRequest = { subjectId: input.subjectId, action, object: input.object, context: input.context, ceilingCredentialId: ceiling };
    if (visibleIn !== undefined) r.subjectVisibleIn = visibleIn;
    return r;
  }

  // The gate's memo key per caller and tenant ('' = platform): the principal of a cached token is one
  // object for as long as the token is, so its keys are built and hashed once.
  const gateKeys = new WeakMap<Principal, Map<string, string>>();

  function gateKey(principal: Principal, tenantId: string | null, ceiling: string | null): string {
    let keys = gateKeys.get(principal);
    if (keys === undefined) gateKeys.set(principal, (keys = new Map()));
    let key = keys.get(tenantId ?? '');
    if (key === undefined) {
      const scope: ObjectRef = tenantId ? { kind: 'tenant', id: tenantId } : PLATFORM;
      key = authz.engine.keyOf({ subjectId: principal.entityId, action: 'authz.check', object: scope, ceilingCredentialId: ceiling });
      keys.set(tenantId ?? '', key);
    }
    return key;
  }

  function prepare(input: CheckInput): PreparedCheck {
    return { input, key: authz.engine.keyOf(request(input, input.action, null)) };
  }

  /**
   * The hot path: with the object's facts, the gate's decision and the answer all memoised, a check is
   * answered synchronously (no promise chain); anything missing falls back to the async path.
   */
  function checkFromMemo(principal: Principal, check: PreparedCheck): { decision: Decision; tenantId: string | null } | undefined {
    const input = check.input;
    const o = input.object;
    let tenantId: string | null;
    if (o.id === null) tenantId = o.tenantId ?? null;
    else {
      const facts = authz.engine.peekObject(o.kind, o.id);
      if (!facts) return undefined;
      tenantId = facts.tenantId;
    }
    const ceiling = principal.scoped ? (principal.credentialId ?? 'missing-credential') : null;
    if (input.subjectId === principal.entityId) {
      const decision = authz.engine.peek(request(input, input.action, ceiling));
      return decision && { decision, tenantId };
    }
    // Only a memoised allow settles the gate here; anything else takes the full path.
    if (!authz.engine.peekKey(gateKey(principal, tenantId, ceiling))?.allowed) return undefined;
    // A gate held in a tenant shows that tenant's subjects and global ones; others take the full path.
    if (tenantId !== null) {
      const subject = authz.engine.peekSubject(input.subjectId);
      if (subject === undefined || (subject.tenantId !== null && subject.tenantId !== tenantId)) return undefined;
    }
    const decision = authz.engine.peekKey(check.key);
    return decision && { decision, tenantId };
  }

  function checkNow(principal: Principal, check: PreparedCheck, requestId: string | null): Decision | undefined {
    const memo = checkFromMemo(principal, check);
    if (!memo) return undefined;
    const input = check.input;
    authz.checkAudit.recordCheck(principal, input.subjectId, input.action, input.object, memo.tenantId, memo.decision, requestId);
    return memo.decision;
  }

  function checkPrepared(principal: Principal, check: PreparedCheck, requestId: string | null): Decision | Promise<Decision> {
    const now = checkNow(principal, check, requestId);
    if (now) return now;
    const input = check.input;
    return (async () => {
      const { tenantId, ceiling, subjectVisibleIn } = await admit(principal, input.subjectId, input.object);
      const decision = await authz.check(request(input, input.action, ceiling, subjectVisibleIn));
      authz.checkAudit.recordCheck(principal, input.subjectId, input.action, input.object, tenantId, decision, requestId);
      return decision;
    })();
  }

  function admitCaller(principal: Principal, tenantId: string | null): void | Promise<void> {
    const ceiling = principal.scoped ? (principal.credentialId ?? 'missing-credential') : null;
    if (authz.engine.peekKey(gateKey(principal, tenantId, ceiling))?.allowed) return;
    return gate(principal, tenantId, GATE_ACTIONS).then((ok) => {
      if (!ok) throw forbidden();
    });
  }

  return {
    prepare,
    checkPrepared,
    admitCaller,
    check: async (principal, input, requestId) => checkPrepared(principal, prepare(input), requestId),
    async bulk(principal, input, requestId) {
      const { tenantId, ceiling, subjectVisibleIn } = await admit(principal, input.subjectId, input.object);
      const results: Record<string, { allowed: boolean; reason: string }> = {};
      for (const action of input.actions) {
        let decision: Decision;
        try {
          decision = await authz.check(request({ ...input, action }, action, ceiling, subjectVisibleIn));
        } catch (err) {
          // One bad action name answers for itself instead of failing its neighbours.
          if ((err as { kind?: string }).kind !== 'INVALID_INPUT') throw err;
          decision = { allowed: false, reason: (err as Error).message, blockIds: [] };
        }
        authz.checkAudit.recordCheck(principal, input.subjectId, action, input.object, tenantId, decision, requestId);
        results[action] = { allowed: decision.allowed, reason: decision.reason };
      }
      return results;
    },
    async explain(principal, input, requestId) {
      if (!(await gate(principal, null, EXPLAIN_ACTIONS))) throw forbidden();
      const { tenantId } = await authz.objectTenant(input.object);
      const ceiling = input.subjectId === principal.entityId && principal.scoped ? (principal.credentialId ?? 'missing-credential') : null;
      const explanation = await authz.explain(request(input, input.action, ceiling));
      const decision: Decision = { allowed: explanation.allowed, reason: explanation.reason, blockIds: explanation.matched_binding ? [explanation.matched_binding.block_id] : [] };
      if (explanation.details) decision.details = explanation.details;
      authz.checkAudit.recordCheck(principal, input.subjectId, input.action, input.object, tenantId, decision, requestId, 'authz.explain');
      return explanation;
    },
  };
}
