// Issuance and renewal (GraphQL V2 and every other entry point: native enroll, EST, gRPC): who may, the
// subject's state, idempotency, the issuer and its profile, TTL bounds, the key (CSR or generated), the
// leaf built and signed through CaKeys, and the write with its audit event and outbox record.
import { createHash, randomUUID } from 'node:crypto';
import type { AuditEvent, AuditWriter } from '../../audit/index.js';
import type { Principal } from '../../auth/index.js';
import type { Sql } from '../../db/client.js';
import { AppError, conflict, forbidden, invalidInput, notFound } from '../../errors.js';
import * as v from '../../validate.js';
import type { PkiAccess, SubjectEntity } from '../authorities/access.js';
import type { Provisioning } from '../authorities/authority-provisioning.js';
import { createBatcher } from './batcher.js';
import * as cq from './certificate-queries.js';
import type { CsrReader } from './csr-reader.js';
import type { IssuanceWriter } from './issuance-writer.js';
import type { CaKeys } from '../keys/types.js';
import { assembleLeaf, generateLeafKey, leafMetadata, planLeaf, validityFor, type LeafKey } from './leaf-builder.js';
import { allowedNames } from '../profiles/profiles.js';
import type { IssuerContext, ProfileContext, Registry } from '../authorities/registry.js';
import { ledgerEntryFor, revocationAudit, revocationInstant, revocationOutbox } from '../revocation/revocation-events.js';

/**
 * Who asks. A principal (GraphQL) is authorized here against credential-management rules. A subject is an
 * entity that entry point authenticated itself (native enroll, EST, re-enroll with its certificate): it
 * may only issue for itself, and renew only the exact certificate it presented.
 */
export type Caller =
  | { kind: 'principal'; principal: Principal; requestId?: string | null; via?: string; clientCertificateId?: string | null }
  | { kind: 'subject'; entityId: string; requestId?: string | null; via: string; presentedCredentialId?: string | null };

/**
 * What is not there: to a management caller as access.missingCertificate says (a refused caller cannot
 * tell another tenant's id from an unused one); an enrolling subject names only itself.
 */
export async function missingTo(access: PkiAccess, caller: Caller, what: string, tenantId?: string | null): Promise<AppError> {
  return caller.kind === 'principal' ? access.missingCertificate(caller.principal, what, tenantId) : notFound(what);
}

export interface IssueInput {
  entityId?: unknown;
  ttlSecs?: unknown;
  csrPem?: unknown;
  idempotencyKey?: unknown;
}

export interface RenewInput {
  credentialId?: unknown;
  ttlSecs?: unknown;
  csrPem?: unknown;
  revokeOld?: unknown;
  idempotencyKey?: unknown;
}

export interface IssuedCertificate {
  certificate: cq.CertificateRow;
  privateKeyPem: string | null;
  chainPem: string;
  idempotentReplay: boolean;
}

type Operation = cq.IssuanceRecord['operation'];

export interface IssuanceSettings {
  generatedKeyIssuance: boolean;
}

function idempotencyKey(value: unknown, required: boolean): string | null {
  if (value === undefined || value === null || value === '') {
    if (required) throw invalidInput('idempotencyKey is required');
    return null;
  }
  if (typeof value !== 'string' || value.length > 255 || !/^[\x21-\x7e]+$/.test(value)) {
    throw invalidInput('idempotencyKey must be 1 to 255 printable ASCII characters without spaces');
  }
  return value;
}

const requestHash = (parts: unknown[]) => createHash('sha256').update(JSON.stringify(parts)).digest('hex');
const actorOf = (c: Caller) => (c.kind === 'principal' ? c.principal.entityId : c.entityId);
const viaOf = (c: Caller) => (c.kind === 'principal' ? c.via ?? 'graphql' : c.via);

export function createIssuance(deps: {
  sql: Sql; keys: CaKeys; registry: Registry; provisioning: Provisioning; access: PkiAccess; writer: IssuanceWriter; csrs: CsrReader;
  audit: AuditWriter; settings: IssuanceSettings;
}) {
  const { sql, keys, registry, access, settings } = deps;

  // Concurrent issuances read their subjects in one statement (one round trip, one write) per batch.
  const contexts = createBatcher<cq.IssueContextKey, cq.IssueContext | null>({
    maxBatch: 256, concurrency: 2, run: (keys) => cq.selectIssueContexts(sql, keys),
  });

  // Likewise for renewals: the certificate, its subject, the key's prior use and any replacement at once.
  const renewals = createBatcher<cq.RenewContextKey, cq.RenewContext | null>({
    maxBatch: 256, concurrency: 2, run: (keys) => cq.selectRenewContexts(sql, keys),
  });

  /** The subject must be able to hold a new certificate: active, in an active tenant. */
  function requireUsable(entity: SubjectEntity & { tenant_status: string | null }): void {
    if (entity.status !== 'active') throw invalidInput(`entity is ${entity.status}: certificates are issued to active entities only`);
    if (entity.tenant_id !== null && entity.tenant_status !== 'active') throw invalidInput(`tenant is ${entity.tenant_status}`);
  }

  async function issuerFor(entity: SubjectEntity, caller: Caller): Promise<{ issuer: IssuerContext; profile: ProfileContext }> {
    let issuer = await registry.activeIssuer(entity.tenant_id);
    // A tenant created while no platform intermediate was active, or whose provisioning failed: now.
    if (!issuer) {
      const made = entity.tenant_id === null
        ? await deps.provisioning.ensurePlatformLeafIssuer()
        : await deps.provisioning.ensureTenantIssuer(entity.tenant_id, { entityId: actorOf(caller), requestId: caller.requestId });
      if (made) issuer = await registry.activeIssuer(entity.tenant_id);
    }
    if (!issuer || !issuer.authority.issuance_enabled || !issuer.authority.key_ref) {
      const revoked = await deps.provisioning.revokedRefusal(entity.tenant_id === null ? 'platform_leaf_issuer' : 'tenant_intermediate', entity.tenant_id);
      if (revoked) throw conflict(revoked);
      throw conflict(entity.tenant_id === null
        ? 'no active platform leaf issuer: the certificate authority is not configured (SVC_PKI_ROOT_CERT_PATH, SVC_PKI_PLATFORM_INTERMEDIATE_*)'
        : 'the tenant has no active certificate authority and none can be provisioned: is a platform intermediate configured?');
    }
    const profile = await registry.profile(issuer.authority.default_profile_id);
    if (!profile) throw new AppError('INTERNAL', `issuer ${issuer.authority.id} has no usable default profile`);
    return { issuer, profile };
  }

  const missing = (caller: Caller, what: string, tenantId?: string | null) => missingTo(access, caller, what, tenantId);

  async function replay(credentialId: string, event: string, caller: Caller, targetId: string, tenantId: string | null): Promise<IssuedCertificate> {
    const row = await cq.selectCertificate(sql, credentialId);
    if (!row) throw notFound('certificate');
    const issuer = await registry.issuer(row.issuer_id);
    deps.audit.record({
      event, outcome: 'allow', actorEntityId: actorOf(caller), tenantId, targetKind: 'credential', targetId, requestId: caller.requestId ?? null,
      details: { credential_id: row.id, via: viaOf(caller) },
    });
    return { certificate: row, privateKeyPem: null, chainPem: issuer?.chainPem ?? '', idempotentReplay: true };
  }

  /** The existing result of the same request, or a conflict when the key was used for another request. */
  async function previous(scopeId: string, op: Operation, key: string | null, hash: string) {
    if (key === null) return undefined;
    const found = await cq.selectIssuanceRecord(sql, scopeId, op, key);
    if (found && found.request_hash !== hash) throw conflict('idempotencyKey was already used for a different request');
    return found?.credential_id;
  }

  interface Plan {
    caller: Caller;
    op: Operation;
    entity: SubjectEntity;
    ttlSecs: unknown;
    csrPem: unknown;
    key: string | null;
    hash: string;
    scopeId: string;
    renewal: { source: cq.CertificateRow; revokeOld: boolean } | null;
  }

  async function build(plan: Plan): Promise<IssuedCertificate> {
    const { issuer, profile } = await issuerFor(plan.entity, plan.caller);
    const now = Date.now();
    const validity = validityFor(plan.ttlSecs, profile.profile, issuer, now);
    const generated = plan.op === 'issue_generated' || plan.op === 'renew_generated';
    let key: LeafKey;
    let privateKeyPem: string | null = null;
    let names = { dnsNames: [] as string[], ipAddresses: [] as string[] };
    let askedCa = false;
    if (generated) {
      const made = await generateLeafKey(profile.profile);
      key = made;
      privateKeyPem = made.privateKeyPem;
    } else {
      const csr = await deps.csrs.read(plan.csrPem);
      if (!profile.profile.key_algorithms.includes(csr.keyAlgorithm)) {
        throw invalidInput(`certificate profile '${profile.profile.name}' does not allow ${csr.keyAlgorithm} keys (allowed: ${profile.profile.key_algorithms.join(', ')})`);
      }
      names = allowedNames(profile.profile, csr);
      askedCa = csr.askedCa;
      key = csr;
    }
    const leafPlan = planLeaf(issuer, profile, plan.entity, key, names, validity);
    const signature = await keys.sign(issuer.authority.key_ref!, leafPlan.tbs);
    const leaf = assembleLeaf(issuer, leafPlan, signature);
    const id = randomUUID();
    const renewedFrom = plan.renewal?.source.id ?? null;
    const metadata = leafMetadata(issuer, profile.profile, leafPlan, leaf, key, plan.entity.tenant_id, generated ? 'generated' : 'csr', renewedFrom);
    const actor = actorOf(plan.caller);
    const via = viaOf(plan.caller);
    const common = {
      entity_id: plan.entity.id, tenant_id: plan.entity.tenant_id, issuer_id: issuer.authority.id, serial_number: leafPlan.serialHex,
      fingerprint_sha256: leaf.fingerprintSha256, not_after: leafPlan.notAfter.toISOString(),
    };
    const audit: AuditEvent[] = [];
    const outbox: cq.OutboxRecord[] = [];
    let revokeOld = null;
    if (plan.renewal) {
      const details = { old_credential_id: plan.renewal.source.id, new_credential_id: id, key_mode: generated ? 'generated' : 'csr', revoke_old: plan.renewal.revokeOld };
      audit.push({
        event: 'certificate.renew', outcome: 'allow', actorEntityId: actor, tenantId: plan.entity.tenant_id, targetKind: 'credential',
        targetId: plan.renewal.source.id, requestId: plan.caller.requestId ?? null, details: { ...common, ...details, via, ttl_secs: validity.ttl },
      });
      outbox.push({ event: 'certificate.renew', tenantId: plan.entity.tenant_id, payload: { target_id: plan.renewal.source.id, credential_id: id, ...common, actor_entity_id: actor, details } });
      if (plan.renewal.revokeOld && plan.renewal.source.status === 'active') {
        const s = plan.renewal.source;
        revokeOld = ledgerEntryFor({
          id: s.id, entity_id: s.entity_id, identifier: s.identifier, issuer_id: s.issuer_id, tenant_id: s.tenant_id,
          fingerprint_sha256: s.metadata.fingerprint_sha256 ?? null, expires_at: s.expires_at,
        }, 'superseded', actor, revocationInstant(now));
        audit.push(revocationAudit(revokeOld, { requestId: plan.caller.requestId, via, details: { replaced_by: id } }));
        outbox.push(revocationOutbox(revokeOld, { replaced_by: id }));
      }
    } else {
      const details = { key_mode: generated ? 'generated' : 'csr', profile_id: profile.profile.id };
      audit.push({
        event: 'certificate.issue', outcome: 'allow', actorEntityId: actor, tenantId: plan.entity.tenant_id, targetKind: 'credential', targetId: id,
        requestId: plan.caller.requestId ?? null, details: { ...common, ...details, via, ttl_secs: validity.ttl, csr_requested_ca: askedCa },
      });
      outbox.push({ event: 'certificate.issue', tenantId: plan.entity.tenant_id, payload: { target_id: id, credential_id: id, ...common, actor_entity_id: actor, details } });
    }
    const credential: cq.NewCertificate = {
      id, entity_id: plan.entity.id, identifier: leafPlan.serialHex, issuer_id: issuer.authority.id, metadata,
      expires_at: leafPlan.notAfter.toISOString(), created_by: actor,
    };
    try {
      await deps.writer.submit({
        credential, request: plan.key === null ? null : { scopeId: plan.scopeId, operation: plan.op, idempotencyKey: plan.key, requestHash: plan.hash },
        renewalOf: renewedFrom, revokeOld, audit, outbox,
      });
    } catch (err) {
      const constraint = (err as { constraint_name?: string }).constraint_name;
      // The same request arrived twice at once and the other one committed first: answer with its result.
      if (constraint === 'certificate_issuance_requests_pkey' && plan.key !== null) {
        const winner = await previous(plan.scopeId, plan.op, plan.key, plan.hash);
        if (winner) return replay(winner, plan.renewal ? 'certificate.renew_replayed' : 'certificate.issue_replayed', plan.caller, plan.renewal?.source.id ?? winner, plan.entity.tenant_id);
      }
      if (constraint === cq.ISSUER_REFUSED_CONSTRAINT) {
        // The issuer was revoked (or retired) after this issuance read it: nothing was written.
        const kind = plan.entity.tenant_id === null ? 'platform_leaf_issuer' : 'tenant_intermediate';
        throw conflict(await deps.provisioning.revokedRefusal(kind, plan.entity.tenant_id)
          ?? `the certificate authority ${issuer.authority.id} stopped issuing while this certificate was being signed (it was retired): retry`);
      }
      if (constraint === 'certificate_renewals_pkey') throw conflict('certificate already renewed');
      if (constraint === 'certificate_revocations__issuer_serial') throw conflict('the certificate being replaced was revoked meanwhile');
      throw err;
    }
    const certificate: cq.CertificateRow = {
      id, entity_id: plan.entity.id, identifier: leafPlan.serialHex, issuer_id: issuer.authority.id, status: 'active', metadata,
      expires_at: leafPlan.notAfter, created_at: new Date(now), revoked_at: null, revocation_reason: null, tenant_id: plan.entity.tenant_id,
    };
    return { certificate, privateKeyPem, chainPem: issuer.chainPem, idempotentReplay: false };
  }

  async function issue(caller: Caller, input: IssueInput, generated: boolean): Promise<IssuedCertificate> {
    if (generated && !settings.generatedKeyIssuance) {
      throw invalidInput('generated-key issuance is disabled: set SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED=true to allow it');
    }
    const entityId = caller.kind === 'subject' ? caller.entityId : v.uuid('entityId', input.entityId);
    if (caller.kind === 'subject' && input.entityId !== undefined && input.entityId !== null && input.entityId !== caller.entityId) throw forbidden();
    const key = idempotencyKey(input.idempotencyKey, !generated);
    const op: Operation = generated ? 'issue_generated' : 'issue_csr';
    const entity = await contexts.submit({ entityId, operation: op, key });
    if (!entity || entity.deleted) throw await missing(caller, 'entity', entity?.tenant_id);
    if (caller.kind === 'principal') await access.requireIssue(caller.principal, entity);
    const hash = requestHash([op, entity.id, input.ttlSecs ?? null, generated ? null : typeof input.csrPem === 'string' ? input.csrPem.trim() : null]);
    if (entity.prior_credential_id) {
      if (entity.prior_hash !== hash) throw conflict('idempotencyKey was already used for a different request');
      return replay(entity.prior_credential_id, 'certificate.issue_replayed', caller, entity.prior_credential_id, entity.tenant_id);
    }
    requireUsable(entity);
    return build({ caller, op, entity, ttlSecs: input.ttlSecs, csrPem: input.csrPem, key, hash, scopeId: entity.id, renewal: null });
  }

  async function renew(caller: Caller, input: RenewInput, generated: boolean): Promise<IssuedCertificate> {
    if (generated && !settings.generatedKeyIssuance) {
      throw invalidInput('generated-key issuance is disabled: set SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED=true to allow it');
    }
    const credentialId = v.uuid('credentialId', input.credentialId);
    const key = idempotencyKey(input.idempotencyKey, true);
    if (input.revokeOld !== undefined && input.revokeOld !== null && typeof input.revokeOld !== 'boolean') throw invalidInput('revokeOld must be a boolean');
    const revokeOld = input.revokeOld === true;
    const op: Operation = generated ? 'renew_generated' : 'renew_csr';
    const context = await renewals.submit({ credentialId, operation: op, key });
    if (!context) throw await missing(caller, 'certificate');
    const { source, entity } = context;
    if (entity.deleted) throw await missing(caller, 'entity', entity.tenant_id);
    if (caller.kind === 'principal') {
      await access.requireRotate(caller.principal, entity, source.id);
    } else if (caller.entityId !== entity.id || caller.presentedCredentialId !== source.id) {
      throw forbidden();
    }
    const hash = requestHash([op, source.id, input.ttlSecs ?? null, generated ? null : typeof input.csrPem === 'string' ? input.csrPem.trim() : null, revokeOld]);
    if (entity.prior_credential_id) {
      if (entity.prior_hash !== hash) throw conflict('idempotencyKey was already used for a different request');
      return replay(entity.prior_credential_id, 'certificate.renew_replayed', caller, source.id, entity.tenant_id);
    }
    if (source.status === 'revoked') throw invalidInput('certificate is revoked: it cannot be renewed; issue a new one');
    if (caller.kind === 'subject' && source.expires_at.getTime() <= Date.now()) throw invalidInput('certificate has expired: enroll again');
    if (context.replacement_id) throw conflict(`certificate already renewed (replaced by ${context.replacement_id}): renew the replacement instead`);
    requireUsable(entity);
    return build({ caller, op, entity, ttlSecs: input.ttlSecs, csrPem: input.csrPem, key, hash, scopeId: source.id, renewal: { source, revokeOld } });
  }

  return {
    issueFromCsr: (caller: Caller, input: IssueInput) => issue(caller, input, false),
    issueGenerated: (caller: Caller, input: IssueInput) => issue(caller, input, true),
    renewFromCsr: (caller: Caller, input: RenewInput) => renew(caller, input, false),
    renewGenerated: (caller: Caller, input: RenewInput) => renew(caller, input, true),
  };
}

export type Issuance = ReturnType<typeof createIssuance>;
