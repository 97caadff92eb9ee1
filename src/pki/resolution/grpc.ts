// CertificateService over gRPC: the bearer caller, then certificate resolution (src/pki/resolution.ts).
// A revoked certificate answers FAILED_PRECONDITION and an expired one OUT_OF_RANGE, each with the trailer
// `certificate-status`, so a caller tells them from an unknown one (NOT_FOUND) by the code alone.
import * as grpc from '@grpc/grpc-js';
import { callerOf, GrpcStatusError, type Unary, type VerifyToken } from '../../grpc/call.js';
import type { CertificateResolution, Resolution } from './resolution.js';

interface ResolveCertificateV2Request {
  certificate_der: Buffer;
  fingerprint_sha256: string;
  issuer_fingerprint_sha256: string;
  serial_number: string;
  expected_tenant_id: string;
}

interface ResolveCertificateV2Response {
  entity_id: string;
  tenant_id: string;
  credential_id: string;
  issuer_id: string;
  expires_at: string;
  status: string;
}

/** The status codes of a certificate that exists but does not authenticate anyone (docs/grpc.md). */
export const REFUSED_STATUS = {
  revoked: { code: grpc.status.FAILED_PRECONDITION, message: 'certificate revoked' },
  expired: { code: grpc.status.OUT_OF_RANGE, message: 'certificate expired' },
} as const;

function answer(r: Resolution): ResolveCertificateV2Response {
  if (r.status !== 'active') {
    const refused = REFUSED_STATUS[r.status];
    throw new GrpcStatusError(refused.code, refused.message, { 'certificate-status': r.status });
  }
  return {
    entity_id: r.entityId, tenant_id: r.tenantId ?? '', credential_id: r.credentialId, issuer_id: r.issuerId,
    expires_at: r.expiresAt.toISOString(), status: r.status,
  };
}

export function certificateGrpcService(deps: { resolution: CertificateResolution; verifyToken: VerifyToken; unary: Unary }): grpc.UntypedServiceImplementation {
  const { resolution, verifyToken, unary } = deps;
  return {
    ResolveCertificateV2: unary<ResolveCertificateV2Request, ResolveCertificateV2Response>('CertificateService.ResolveCertificateV2', async (r, ctx) => {
      const caller = await callerOf(ctx.metadata, verifyToken);
      ctx.checkpoint();
      return answer(await resolution.resolve(caller, {
        certificateDer: r.certificate_der, fingerprintSha256: r.fingerprint_sha256, issuerFingerprintSha256: r.issuer_fingerprint_sha256,
        serialNumber: r.serial_number, expectedTenantId: r.expected_tenant_id,
      }));
    }),
    RevokeEntityCertificates: unary<{ entity_id: string; reason: string }, { revoked: string }>('CertificateService.RevokeEntityCertificates', async (r, ctx) => {
      const caller = await callerOf(ctx.metadata, verifyToken);
      ctx.checkpoint();
      // uint64 travels as a decimal string (LOADER_OPTIONS longs: String).
      return { revoked: String(await resolution.revokeEntity(caller, r.entity_id, r.reason, null, ctx.peer?.credentialId ?? null)) };
    }),
  };
}
