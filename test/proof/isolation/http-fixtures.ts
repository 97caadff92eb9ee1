// How to call every HTTP route the listeners registered (service.routes(), keyed `<listener> <METHOD>
// <pattern>`), as data. `path` and `body` use the fixture references of graphql-fixtures.ts ($key for the
// target's objects, and the other tenant's in own/foreign combinations; #key constants). `device` routes
// authenticate devices: the device caller sends its own key (`Client <key>`), the other tenant's admin
// the key of its own tenant's device. A route that takes no id of the target says why in `none`; a
// public route (publication by design) says why in `public` and is only checked to answer without a
// server error. A route without a row fails the matrix.
import type { CallerName } from './world.js';

export interface HttpRow {
  path?: string;
  /** JSON-encoded unless contentType is given (then sent as is). */
  body?: unknown;
  contentType?: string;
  device?: true;
  /** Answers for these callers are legitimate (still checked for counts; the snapshot still applies). */
  answers?: Partial<Record<CallerName, string>>;
  /** Not asked by these callers, and why. */
  skip?: Partial<Record<CallerName, string>>;
  /** A 200 with a decision ({allowed:false}) is a refusal: the runtime checks. */
  decision?: true;
  public?: string;
  none?: string;
  /** TLS listener (enrollment): called over HTTPS with the listener's certificate. */
  tls?: true;
}

const SENML = [{ bn: 'matrix:', n: 'temp', u: 'Cel', v: 21.5 }];
const sameAsGraphql = 'its own session (the target admin\'s, whose scoped token this is): self-service';

export const HTTP: Record<string, HttpRow> = {
  // ---- management listener
  'http GET /health': { public: 'health' },
  'http GET /health/ready': { public: 'health' },
  'http GET /health/live': { public: 'liveness' },
  'http GET /metrics': { public: 'metrics: operational counters, labelled by route pattern, never by tenant or object' },
  'http GET /.well-known/jwks.json': { public: 'verification keys' },
  'http GET /auth/public-config': { public: 'deployment settings' },
  'http POST /auth/signup': { none: 'creates a new global human; no id' },
  'http POST /auth/login': { body: { identifier: '#alice', secret: '#alicePassword', tenant_id: '$tenant' } },
  'http POST /auth/logout': { none: "ends the caller's own session" },
  'http GET /auth/introspect': { none: "the caller's own token" },
  'http GET /auth/session': { none: "the caller's own session" },
  'http GET /auth/sessions/:id': { path: '/auth/sessions/$session', answers: { scopedToken: sameAsGraphql } },
  'http POST /auth/keys/rotate': { none: 'platform signing keys (refused for every caller here all the same)' },
  'http GET /auth/email/verify': { none: 'an emailed token' },
  'http POST /auth/email/verify': { none: 'an emailed token' },
  'http POST /auth/email/resend': { none: "the caller's own address" },
  'http POST /graphql': { none: 'every operation is a row of the GraphQL part of the matrix' },
  'http POST /authz/check': { body: { subject_id: '$device', action: 'publish', resource_id: '$channel' }, decision: true },
  'http POST /authz/check/bulk': { body: { subject_id: '$device', resource_id: '$channel', actions: ['publish', 'subscribe'] }, decision: true },
  'http POST /authz/explain': { body: { subject_id: '$device', action: 'publish', resource_id: '$channel' }, decision: true },
  'http GET /audit/export': { path: '/audit/export?tenantId=$tenant' },
  'http GET /certs/trust-bundle.pem': { public: 'trust anchors (SPEC: public)' },
  'http GET /certs/issuers/:issuer_id/ca.crt': { path: '/certs/issuers/$authority/ca.crt', public: "an issuer's certificate (AIA caIssuers, public)" },
  'http GET /certs/issuers/:issuer_id/crl': { path: '/certs/issuers/$authority/crl', public: 'CRL (SPEC: public)' },
  'http POST /certs/issuers/:issuer_id/ocsp': { path: '/certs/issuers/$authority/ocsp', public: 'OCSP (SPEC: public)', body: '', contentType: 'application/ocsp-request' },
  'http GET /certs/issuers/:issuer_id/ocsp/*': { path: '/certs/issuers/$authority/ocsp/MAA=', public: 'OCSP (SPEC: public)' },
  'http ANY /api/custom/*': { path: '$endpointPath', body: { tenantId: '$tenant' } },
  // ---- ingest
  'messaging POST /http/m/:ws/c/:ch': { path: '/http/m/$tenant/c/$ceilingChannel', body: SENML, contentType: 'application/senml+json', device: true },
  'messaging POST /http/m/:ws/c/:ch/*': { path: '/http/m/$tenant/c/$ceilingChannel/matrix', body: SENML, contentType: 'application/senml+json', device: true },
  'messaging GET /mqtt': { none: 'MQTT over WebSocket (a plain GET is refused); its publishes and subscriptions are the MQTT rows (messaging-topics.ts)' },
  'messaging GET /ws/m/:ws/c/:ch': { none: 'live subscriptions over WebSocket (a plain GET answers 426); their grants: test/messaging/live.test.ts' },
  // ---- reader: the sensor subscribes to the channel through its role, and the read-only member reads it
  'reader GET /:ws/channels/:ch/messages': {
    path: '/$tenant/channels/$channel/messages', device: true,
    answers: { device: 'the device caller holds subscribe on this channel (its role)', reader: 'a tenant-scope read covers the channel' },
  },
  // ---- broker admin
  'broker_admin ANY /api/v1/stats': { none: 'cluster statistics (no tenant data), behind its own token' },
  'broker_admin ANY /api/v1/cluster': { none: 'cluster topology (no tenant data), behind its own token' },
  'broker_admin ANY /api/v1/overview': { none: 'cluster overview (no tenant data), behind its own token' },
  // ---- enrollment (TLS): the subject always comes from the credential; ids in the body must not steer it
  'enrollment POST /pki/enroll': {
    tls: true, body: { csr_pem: '#csr', idempotency_key: 'matrix-enroll', entity_id: '$device', tenant_id: '$tenant' },
    skip: { device: 'the device caller enrolling itself is the route\'s purpose (test/pki/enrollment/enrollment.test.ts)' },
  },
  'enrollment POST /pki/reenroll': { tls: true, body: { csr_pem: '#csr', idempotency_key: 'matrix-reenroll', credential_id: '$certificate' } },
  'enrollment GET /.well-known/est/cacerts': { tls: true, public: 'EST CA certificates (RFC 7030: public)' },
  'enrollment GET /.well-known/est/csrattrs': { tls: true, public: 'EST CSR attributes (RFC 7030: public)' },
  'enrollment POST /.well-known/est/simpleenroll': {
    tls: true, path: '/.well-known/est/#targetAlias/simpleenroll', body: '#csrBase64', contentType: 'application/pkcs10', device: true,
    skip: { device: 'the device caller enrolling itself under its own tenant\'s label is the route\'s purpose (test/pki/enrollment/enrollment-est.test.ts)' },
  },
  'enrollment POST /.well-known/est/simplereenroll': { tls: true, path: '/.well-known/est/#targetAlias/simplereenroll', body: '#csrBase64', contentType: 'application/pkcs10', device: true },
  'enrollment POST /.well-known/est/serverkeygen': {
    tls: true, path: '/.well-known/est/#targetAlias/serverkeygen', body: '#csrBase64', contentType: 'application/pkcs10', device: true,
    skip: { device: 'the device caller enrolling itself under its own tenant\'s label is the route\'s purpose (test/pki/enrollment/enrollment-est.test.ts)' },
  },
};
