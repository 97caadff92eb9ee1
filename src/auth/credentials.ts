// Credential management: passwords, access tokens (unscoped and scoped with a ceiling), device shared
// keys, listings (metadata only) and revocation, each gated by the entity's owning tenant and audited.
import { randomUUID } from 'node:crypto';
import type { AuditWriter } from '../audit/writer.js';
import type { Authz } from '../authz/types.js';
import type { Sql } from '../db/client.js';
import { pageOf } from '../db/paging.js';
import { forbidden, invalidInput } from '../errors.js';
import type { CredentialAuthority } from './authority.js';
import * as cq from './credential-queries.js';
import { checkPasswordPolicy, hashPassword, verifyPassword, type ScryptParams } from './passwords.js';
import type { Principal } from './principal.js';
import * as q from './queries.js';
import { chosenKeyBits, formatAccessToken, MIN_CHOSEN_KEY_BITS, newAccessTokenSecret, newSharedKey, uuidToHex, type KeyedHash } from './secrets.js';
import type { RequestMeta } from './sessions.js';
import { normalisePermissions, toPermissionOutput, withinCeiling, type PermissionInput } from './token-permissions.js';
import type { AuthInvalidation } from './verifier.js';
import type { JsonBounds } from '../validate.js';

export const CHOSEN_KEY_REFUSED = `key refused: a chosen key must be at most 256 printable characters carrying at least ${MIN_CHOSEN_KEY_BITS} bits `
  + '(e.g. 32 hex or 22 base64url characters of a random value) and not be in use; omit key to have one generated';

export interface CreateAccessTokenInput {
  name?: string | null;
  description?: string | null;
  expiresAt?: string | null;
  permissions?: PermissionInput[] | null;
  subjectId?: string | null;
  scoped?: boolean | null;
}

function futureDate(value: string | null | undefined, field: string): Date | null {
  if (value === null || value === undefined) return null;
  const at = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(at.getTime())) throw invalidInput(`${field} must be an RFC 3339 timestamp`);
  if (at.getTime() <= Date.now()) throw invalidInput(`${field} must be in the future`);
  return at;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function credentialOutput(c: cq.CredentialRow) {
  return {
    id: c.id, entityId: c.entity_id, kind: c.kind, identifier: c.identifier, status: c.status, scoped: c.scoped, name: c.name,
    description: c.description, expiresAt: iso(c.expires_at), lastUsedAt: iso(c.last_used_at), createdAt: c.created_at.toISOString(),
    revokedAt: iso(c.revoked_at),
  };
}

export function createCredentialService(deps: {
  sql: Sql; audit: AuditWriter; authz: Authz; authority: CredentialAuthority; hash: () => KeyedHash;
  invalidate: (change: AuthInvalidation) => void;
  settings: { scrypt: ScryptParams; minPasswordChars: number; lists: { defaultLimit: number; maxLimit: number }; documents: JsonBounds };
}) {
  const { sql, audit, authz, authority, settings } = deps;

  const record = (p: Principal, event: string, entity: q.EntityRow, targetId: string, meta: RequestMeta, details: Record<string, unknown> = {}) =>
    audit.record({
      event, outcome: 'allow', actorEntityId: p.entityId, tenantId: entity.tenant_id, targetKind: 'credential', targetId,
      requestId: meta.requestId, details: { entity_id: entity.id, via: p.credentialKind, ...details },
    });

  function noScoped(p: Principal): void {
    if (p.scoped) throw forbidden();
  }

  async function setPassword(entityId: string, password: string, actor: string | null): Promise<string> {
    const hash = await hashPassword(password, settings.scrypt);
    return sql.begin(async (tx) => {
      const old = await tx<{ id: string }[]>`
        select id from credentials where entity_id = ${entityId} and kind = 'password' and status = 'active' order by id for update`;
      await cq.revokeCredentials(tx, old.map((o) => o.id), actor, 'replaced');
      return (await cq.insertCredential(tx, { entityId, kind: 'password', secretHash: hash, createdBy: actor })).id;
    });
  }

  async function checkActions(perms: { actions: string[] }[]): Promise<void> {
    const names = [...new Set(perms.flatMap((p) => p.actions))];
    if (names.length === 0) return;
    const known = await cq.knownActions(sql, names);
    const unknown = names.find((n) => !known.has(n));
    if (unknown !== undefined) throw invalidInput(`unknown action: ${unknown}`);
  }

  async function loadToken(p: Principal, credentialId: string) {
    const cred = await cq.selectCredential(sql, credentialId);
    if (!cred || cred.kind !== 'access_token') throw await authority.missing(p, 'access token');
    return { cred, entity: (await q.selectEntity(sql, cred.entity_id)) as q.EntityRow };
  }

  async function revoke(p: Principal, cred: cq.CredentialRow, entity: q.EntityRow, event: string, meta: RequestMeta): Promise<boolean> {
    const revoked = await cq.revokeCredentials(sql, [cred.id], p.entityId, 'revoked');
    deps.invalidate({ credentials: [cred.id] });
    await authz.invalidate({ kind: 'credentials', credentialIds: [cred.id] });
    record(p, event, entity, cred.id, meta, { kind: cred.kind, already_revoked: revoked.length === 0 });
    return true;
  }

  return {
    async createPassword(p: Principal, entityId: string, password: string, meta: RequestMeta): Promise<boolean> {
      noScoped(p);
      const entity = await authority.require(p, await q.selectEntity(sql, entityId), 'manage');
      const problem = checkPasswordPolicy(password, settings.minPasswordChars);
      if (problem) throw invalidInput(problem);
      const id = await setPassword(entity.id, password, p.entityId);
      record(p, 'password.set', entity, id, meta, { self: p.entityId === entity.id });
      return true;
    },

    async changeOwnPassword(p: Principal, current: string, next: string, meta: RequestMeta): Promise<boolean> {
      noScoped(p);
      const entity = (await q.selectEntity(sql, p.entityId)) as q.EntityRow;
      const stored = await cq.selectPassword(sql, p.entityId);
      if (!stored || !(await verifyPassword(current, stored.secret_hash))) throw invalidInput('current password is incorrect');
      const problem = checkPasswordPolicy(next, settings.minPasswordChars);
      if (problem) throw invalidInput(problem);
      const id = await setPassword(p.entityId, next, p.entityId);
      record(p, 'password.set', entity, id, meta, { self: true, change: true });
      return true;
    },

    async createAccessToken(p: Principal, input: CreateAccessTokenInput, meta: RequestMeta) {
      const name = (input.name ?? '').trim();
      if (!name) throw invalidInput('name is required');
      if (name.length > 200) throw invalidInput('name must be at most 200 characters');
      const scoped = input.scoped ?? true;
      const expiresAt = futureDate(input.expiresAt, 'expiresAt');
      const permissions = normalisePermissions(input.permissions, scoped, settings.documents);
      await checkActions(permissions);
      const entity = await q.selectEntity(sql, input.subjectId ?? p.entityId);
      if (p.scoped) {
        // A scoped token may only mint a narrower token for its own owner, expiring no later than itself.
        const own = p.credentialId ? await cq.selectCredential(sql, p.credentialId) : null;
        const ceiling = p.credentialId ? await cq.selectLimits(sql, [p.credentialId]) : [];
        const ownExpiry = own?.expires_at ?? null;
        if (!entity || entity.id !== p.entityId || !scoped || !withinCeiling(permissions, ceiling)
          || (ownExpiry && (!expiresAt || expiresAt > ownExpiry))) throw forbidden();
      } else {
        await authority.require(p, entity, 'manage');
      }
      const subject = entity as q.EntityRow;
      const id = randomUUID();
      const secret = newAccessTokenSecret();
      await sql.begin(async (tx) => {
        await cq.insertCredential(tx, {
          id, entityId: subject.id, kind: 'access_token', secretHash: deps.hash()(secret), identifier: `svc_${uuidToHex(id)}`,
          scoped, name, description: input.description ?? null, expiresAt, createdBy: p.entityId,
        });
        await cq.insertLimits(tx, id, permissions);
      });
      record(p, 'access_token.create', subject, id, meta, { scoped, permissions: permissions.length, name });
      return { credentialId: id, token: formatAccessToken(id, secret), name, description: input.description ?? null, expiresAt: iso(expiresAt) };
    },

    async replaceAccessTokenPermissions(p: Principal, credentialId: string, list: PermissionInput[], meta: RequestMeta): Promise<boolean> {
      noScoped(p);
      const { cred, entity } = await loadToken(p, credentialId);
      await authority.require(p, entity, 'manage');
      if (!cred.scoped) throw invalidInput('cannot set permissions on an unscoped access token');
      if (cred.status !== 'active') throw invalidInput('access token is revoked');
      const permissions = normalisePermissions(list, true, settings.documents);
      await checkActions(permissions);
      await sql.begin(async (tx) => {
        await tx`select id from credentials where id = ${cred.id} for update`;
        await cq.deleteLimits(tx, cred.id);
        await cq.insertLimits(tx, cred.id, permissions);
      });
      await authz.invalidate({ kind: 'credentials', credentialIds: [cred.id] });
      record(p, 'access_token.replace', entity, cred.id, meta, { permissions: permissions.length });
      return true;
    },

    async revokeAccessToken(p: Principal, credentialId: string, meta: RequestMeta): Promise<boolean> {
      const { cred, entity } = await loadToken(p, credentialId);
      // A scoped token may give itself up, and nothing else.
      if (p.scoped ? p.credentialId !== cred.id : !(await authority.allowed(p, entity, 'manage', true))) throw forbidden();
      return revoke(p, cred, entity, 'access_token.revoke', meta);
    },

    async accessTokens(p: Principal, args: { subjectId?: string | null; status?: string | null; limit?: number | null; offset?: number | null }) {
      // The listing reads credentials without consulting a ceiling: scoped tokens are refused outright.
      noScoped(p);
      const entity = await authority.require(p, await q.selectEntity(sql, args.subjectId ?? p.entityId), 'read');
      if (args.status && args.status !== 'active' && args.status !== 'revoked') throw invalidInput("status must be 'active' or 'revoked'");
      const page = pageOf({ limit: args.limit ?? 100, offset: args.offset }, settings.lists);
      const rows = await cq.listAccessTokens(sql, entity.id, args.status ?? null, page);
      const total = rows[0]?.total ?? (page.offset > 0 ? await cq.countAccessTokens(sql, entity.id, args.status ?? null) : 0);
      const limits = rows.length ? await cq.selectLimits(sql, rows.map((r) => r.id)) : [];
      return {
        total,
        items: rows.map((r) => ({
          credentialId: r.id, name: r.name ?? '', description: r.description, identifier: r.identifier, status: r.status, scoped: r.scoped,
          permissions: limits.filter((l) => l.credential_id === r.id).map(toPermissionOutput),
          expiresAt: iso(r.expires_at), lastUsedAt: iso(r.last_used_at), createdAt: r.created_at.toISOString(),
        })),
      };
    },

    async createSharedKey(p: Principal, entityId: string, input: { description?: string | null; expiresAt?: string | null; key?: string | null }, meta: RequestMeta) {
      noScoped(p);
      const entity = await authority.require(p, await q.selectEntity(sql, entityId), 'manage');
      if (entity.kind === 'human') throw invalidInput('invalid value: shared keys are for non-human entities');
      const expiresAt = futureDate(input.expiresAt, 'expiresAt');
      const key = input.key ?? newSharedKey();
      // A chosen key must be as hard to guess as a random 128-bit one, and one already held by some entity
      // is refused with the same words: this must never tell whether a guessed device key exists.
      const refused = () => invalidInput(CHOSEN_KEY_REFUSED);
      if (input.key !== undefined && input.key !== null && (key.length > 256 || chosenKeyBits(key) < MIN_CHOSEN_KEY_BITS)) throw refused();
      let id: string;
      try {
        ({ id } = await cq.insertCredential(sql, {
          entityId: entity.id, kind: 'shared_key', secretHash: deps.hash()(key), description: input.description ?? null, expiresAt, createdBy: p.entityId,
        }));
      } catch (err) {
        if ((err as { constraint_name?: string }).constraint_name === 'credentials__shared_key_hash') throw refused();
        throw err;
      }
      record(p, 'shared_key.create', entity, id, meta, { chosen_key: input.key !== undefined && input.key !== null });
      return { credentialId: id, key, expiresAt: iso(expiresAt) };
    },

    async credentials(p: Principal, entityId: string) {
      noScoped(p);
      const entity = await authority.require(p, await q.selectEntity(sql, entityId), 'read');
      const rows = await cq.listCredentials(sql, entity.id);
      return { total: rows.length, items: rows.map(credentialOutput) };
    },

    async revokeCredential(p: Principal, credentialId: string, entityId: string | null | undefined, meta: RequestMeta): Promise<boolean> {
      noScoped(p);
      const cred = await cq.selectCredential(sql, credentialId);
      if (!cred || (entityId && entityId !== cred.entity_id)) throw await authority.missing(p, 'credential');
      const entity = await authority.require(p, await q.selectEntity(sql, cred.entity_id), 'manage');
      if (cred.kind === 'certificate') throw invalidInput('certificates are revoked with revokeCertificateV2');
      return revoke(p, cred, entity, 'credential.revoke', meta);
    },
  };
}

export type CredentialService = ReturnType<typeof createCredentialService>;
