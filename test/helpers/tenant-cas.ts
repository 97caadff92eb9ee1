// Many tenant CAs, fast, for tests at fleet scale: n tenants, each with an active tenant intermediate whose
// certificate is real (signed with the platform intermediate's key file, built by the service's own DER
// builders with the subject and extensions it gives its CAs), all sharing the key of one authority the
// service provisioned, so each row's key reference decrypts to its certificate's key and any can issue.
// Provisioning through the service costs 30-170 ms per tenant on these machines; this, well under 1 ms.
import { createHash, createPrivateKey, randomUUID, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Sql } from '../../src/db/client.js';
import { readCertificate } from '../../src/pki/issuance/certificate-info.js';
import { certificateDer, randomSerial, signatureAlgorithmDer, tbsCertificateDer } from '../../src/pki/x509/der.js';
import { authorityKeyIdentifier, caBasicConstraints, caKeyUsage, subjectKeyIdentifier } from '../../src/pki/issuance/extensions.js';
import type { AuthorityRow } from '../../src/pki/index.js';
import { Name } from '../../src/pki/x509/x509.js';
import type { CaFiles } from './pki.js';

export interface BulkAuthorities {
  tenantIds: string[];
  /** Bytes the tenant CAs' subjects take in a TLS CertificateRequest (DER Name plus its 2-byte length each). */
  subjectBytes: number;
}

/** Inserts `n` tenants (aliases `<prefix>-1` … `<prefix>-n`) with their active authorities. */
export async function bulkTenantAuthorities(sql: Sql, ca: CaFiles, template: AuthorityRow, n: number, prefix = 'bulk'): Promise<BulkAuthorities> {
  if (!template.certificate_der || !template.key_ref) throw new Error('the template authority has no certificate or key');
  const [parent] = await sql<AuthorityRow[]>`select * from pki_authorities where kind = 'platform_intermediate' and status = 'active'`;
  const issuer = readCertificate(parent!.certificate_der!, 'platform intermediate');
  const own = readCertificate(template.certificate_der, 'template authority');
  const key = createPrivateKey(readFileSync(ca.intermediateKey));
  const algorithm = signatureAlgorithmDer('ecdsa-p256');
  const extensions = [caBasicConstraints(0), caKeyUsage(), subjectKeyIdentifier(own.subjectKeyId), authorityKeyIdentifier(issuer.subjectKeyId)];
  const tenants = await sql<{ id: string }[]>`
    insert into tenants (name, alias) select ${prefix} || '-' || g, ${prefix} || '-' || g from generate_series(1, ${n}) g
    order by g returning id`;
  // Whole seconds, as the certificate states them.
  const notBefore = new Date(Math.floor((Date.now() - 300_000) / 1000) * 1000);
  const notAfter = own.notAfter;
  let subjectBytes = 0;
  const rows = tenants.map(({ id: tenantId }) => {
    const id = randomUUID();
    const subject = `CN=tenant-${tenantId} CA ${id.slice(0, 8)}`;
    const subjectName = Buffer.from(new Name(subject).toArrayBuffer());
    subjectBytes += subjectName.length + 2;
    const serial = randomSerial();
    const tbs = tbsCertificateDer({
      serial, signatureAlgorithm: algorithm, issuerName: issuer.subjectNameDer, notBefore, notAfter, subjectName,
      subjectPublicKeyInfo: own.spkiDer, extensions,
    });
    const der = certificateDer(tbs, algorithm, sign('sha256', tbs, key));
    const url = (u: string | null) => u?.replace(template.id, id) ?? null;
    return {
      id, tenant_id: tenantId, parent_id: parent!.id, kind: 'tenant_intermediate', version: 1, status: 'active', issuance_enabled: true,
      subject, serial_number: serial.toString('hex').replace(/^0+(?=.)/, ''), fingerprint_sha256: createHash('sha256').update(der).digest('hex'),
      subject_key_id: template.subject_key_id, authority_key_id: template.authority_key_id, certificate_der: der, key_backend: template.key_backend,
      key_ref: sql.json(template.key_ref as never), key_algorithm: template.key_algorithm, provisioning_mode: 'automatic',
      default_profile_id: template.default_profile_id, ocsp_url: url(template.ocsp_url), ca_issuers_url: url(template.ca_issuers_url),
      crl_distribution_point_url: url(template.crl_distribution_point_url), not_before: notBefore, not_after: notAfter, activated_at: new Date(),
    };
  });
  for (let i = 0; i < rows.length; i += 500) await sql`insert into pki_authorities ${sql(rows.slice(i, i + 500) as never)}`;
  return { tenantIds: tenants.map((r) => r.id), subjectBytes };
}
