// The one verifier of client certificates, for every listener that accepts them: the enrollment listener,
// MQTT over TLS and gRPC with mutual TLS. The handshake only asks for a certificate, naming a few CAs at
// most (never every tenant's: the CertificateRequest's list is capped at 64 KiB, about 936 tenant CAs);
// the chain is verified here against the service's own records. A certificate the service issued is found
// by its fingerprint through the resolution cache gRPC ResolveCertificateV2 uses (dropped on revocation on
// every instance) and must be active there; its signature is checked against its recorded issuer, and that
// issuer and every authority above it must still vouch for it (active, retiring or retired, unexpired), so
// a revoked or expired authority refuses its leaves. A certificate without a record is placed by its
// issuer's key identifier or name: signed by one of ours, it is unknown (never accepted); otherwise it may
// be an operator's external CA's, accepted on OpenSSL's chain verdict alone when the listener allows it.
// Per handshake: map lookups (fingerprint, issuer, parents); O(1) in the number of tenants.
import { X509Certificate, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Queryable } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import type { AuthorityRow } from '../authorities/authority-queries.js';
import { readCertificate, type CertificateInfo } from '../issuance/certificate-info.js';
import type { ResolvedCertificate } from '../issuance/certificates.js';
import { selectIssuerCandidates, VOUCHING_STATES } from '../authorities/chain-queries.js';
import type { Chains } from '../authorities/chains.js';
import { CHANGED_TOPIC, type Registry } from '../authorities/registry.js';

/** The leaf as a TLS listener saw it, with OpenSSL's verdict against the listener's own `ca` list. */
export interface PresentedCertificate {
  der: Uint8Array;
  chainVerified: boolean;
  /** OpenSSL's reason when the chain did not verify (named in a refusal of a foreign certificate). */
  chainError?: string | null;
}

export interface VerifyOptions {
  /**
   * A certificate none of the service's authorities signed is accepted when OpenSSL verified its chain
   * (an operator's client CA file: SVC_MQTT_TLS_CLIENT_CA_PATH, SVC_GRPC_TLS_CLIENT_CA_PATH). Never applies
   * to a certificate one of the service's authorities signed: those are accepted only when active here.
   */
  acceptExternal: boolean;
}

export type RefusalCode = 'unreadable' | 'self_signed' | 'foreign' | 'forged' | 'unknown' | 'expired' | 'not_yet_valid' | 'revoked' | 'issuer_untrusted';

export type ClientCertificateVerdict =
  | { ok: true; issuedHere: true; certificate: ResolvedCertificate }
  | { ok: true; issuedHere: false; subject: string }
  | { ok: false; code: RefusalCode; reason: string };

const refuse = (code: RefusalCode, reason: string): ClientCertificateVerdict => ({ ok: false, code, reason });

/**
 * Whether an authority still vouches for what it signed. Besides its state, a `revoked_at` column (a
 * compromised authority, distinct from retirement) refuses it whatever the state says.
 */
function vouchState(row: AuthorityRow, now: number): string | null {
  if (!VOUCHING_STATES.has(row.status)) return row.status;
  if ((row as unknown as { revoked_at?: Date | null }).revoked_at) return 'revoked';
  if (!row.not_after || row.not_after.getTime() <= now) return 'expired';
  if (row.not_before && row.not_before.getTime() > now) return 'not valid yet';
  return null;
}

/** A key of another type than the signature's makes OpenSSL throw: that is a signature that does not verify. */
function verifies(cert: X509Certificate, key: KeyObject): boolean {
  try {
    return cert.verify(key);
  } catch {
    return false;
  }
}

export function createClientCertificates(deps: {
  sql: Queryable; hub: NotifyHub; registry: Registry; chains: Chains;
  /** The service's record of a leaf by its DER, cached and dropped on revocation (src/pki/resolution.ts). */
  resolve: (der: Uint8Array) => Promise<ResolvedCertificate | null>;
}) {
  const { sql, registry, chains } = deps;
  // Signatures do not change: a leaf verified once under its issuer needs no second verification.
  const signed = new LRUCache<string, true>({ max: 50_000 });
  // Unrecorded certificates (foreign, self-signed, forged) by the issuer they name; a new authority drops them.
  const candidates = new LRUCache<string, Promise<AuthorityRow[]>>({ max: 10_000 });
  const keys = new LRUCache<string, KeyObject>({ max: 1_000 });
  const dropCandidates = () => candidates.clear();
  const unsubscribe = [deps.hub.subscribe(CHANGED_TOPIC, dropCandidates), deps.hub.onReconnect(dropCandidates)];

  /** The first authority from `first` upwards that no longer vouches, described; null when all do. */
  async function untrusted(first: AuthorityRow, now: number): Promise<string | null> {
    let row: AuthorityRow | null = first;
    for (let depth = 0; row && depth < 8; depth++) {
      const state = vouchState(row, now);
      if (state) return `its issuing authority ${row.id} (${row.kind.replace(/_/g, ' ')}) is ${state}`;
      if (row.kind === 'root' || !row.parent_id) return null;
      row = await chains.authority(row.parent_id);
    }
    return 'its chain of authorities is incomplete';
  }

  async function recorded(der: Uint8Array, record: ResolvedCertificate): Promise<ClientCertificateVerdict> {
    if (record.status === 'revoked') return refuse('revoked', `client certificate is revoked${record.revocationReason ? ` (${record.revocationReason})` : ''}`);
    if (record.status === 'expired') return refuse('expired', 'client certificate has expired');
    const now = Date.now();
    if (record.notBefore && record.notBefore.getTime() > now) return refuse('not_yet_valid', 'client certificate is not valid yet');
    const issuer = await registry.issuer(record.issuerId);
    if (!issuer) return refuse('issuer_untrusted', 'client certificate\'s issuer is not an authority of this service');
    const key = `${record.fingerprintSha256}:${record.issuerId}`;
    if (!signed.has(key)) {
      if (!verifies(new X509Certificate(der), issuer.info.publicKey)) return refuse('forged', 'client certificate signature does not verify under its issuer');
      signed.set(key, true);
    }
    // The issuer's row from the registry (dropped on every authority change), its parents by id.
    const refused = await untrusted(issuer.authority, now);
    if (refused) return refuse('issuer_untrusted', `client certificate is no longer trusted: ${refused}`);
    return { ok: true, issuedHere: true, certificate: record };
  }

  function publicKeyOf(row: AuthorityRow): KeyObject | null {
    if (!row.certificate_der) return null;
    let key = keys.get(row.id);
    if (!key) {
      key = new X509Certificate(row.certificate_der).publicKey;
      keys.set(row.id, key);
    }
    return key;
  }

  function issuerCandidates(info: CertificateInfo): Promise<AuthorityRow[]> {
    const keyId = info.authorityKeyId?.toString('hex') ?? null;
    const cacheKey = `${keyId ?? ''}|${info.issuer}`;
    const hit = candidates.get(cacheKey);
    if (hit) return hit;
    const loading = selectIssuerCandidates(sql, keyId, info.issuer);
    candidates.set(cacheKey, loading);
    loading.catch(() => candidates.delete(cacheKey));
    return loading;
  }

  async function unrecorded(p: PresentedCertificate, options: VerifyOptions): Promise<ClientCertificateVerdict> {
    let info: CertificateInfo;
    try {
      info = readCertificate(Buffer.from(p.der), 'client certificate');
    } catch {
      return refuse('unreadable', 'client certificate cannot be read');
    }
    const named = await issuerCandidates(info);
    const signer = named.find((a) => {
      const key = publicKeyOf(a);
      return key !== null && verifies(info.x509, key);
    });
    if (signer) {
      // Signed by one of ours, yet not in the records: never accepted, whatever its dates.
      const now = Date.now();
      if (info.notAfter.getTime() <= now) return refuse('expired', 'client certificate has expired');
      if (info.notBefore.getTime() > now) return refuse('not_yet_valid', 'client certificate is not valid yet');
      return refuse('unknown', 'client certificate is not known to this service');
    }
    if (named.length > 0) return refuse('forged', 'client certificate names an authority of this service as its issuer, but that authority did not sign it');
    if (info.issuer === info.subject && verifies(info.x509, info.publicKey)) {
      return refuse('self_signed', 'client certificate is self-signed, not issued by this service');
    }
    if (options.acceptExternal && p.chainVerified) return { ok: true, issuedHere: false, subject: info.subject };
    return refuse('foreign', `client certificate is not issued by this service's authorities${p.chainError ? ` (${p.chainError})` : ''}`);
  }

  return {
    /** The verdict on a presented leaf. Never throws for what a client sends; a database failure rejects. */
    async verify(p: PresentedCertificate, options: VerifyOptions): Promise<ClientCertificateVerdict> {
      const record = await deps.resolve(p.der);
      return record ? recorded(p.der, record) : unrecorded(p, options);
    },
    /** What a TLS listener names as acceptable client CAs: the active roots, as PEM ('' without a configured CA). */
    async anchorsPem(): Promise<string> {
      const roots = await chains.roots();
      return roots.map((der) => new X509Certificate(der).toString()).join('');
    },
    close(): void {
      for (const u of unsubscribe) u();
    },
  };
}

export type ClientCertificates = ReturnType<typeof createClientCertificates>;
