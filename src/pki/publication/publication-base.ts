// Where relying parties reach the publication routes: the base of the OCSP, caIssuers and CRL URLs that
// certificates embed. Read whenever a certificate is built, never stored per authority, so moving the
// publication address moves the URLs of every certificate issued afterwards, by old and new issuers alike.
import { unavailable } from '../../errors.js';
import { publicationUrls, type PublicationUrls } from '../issuance/extensions.js';

/** Only these issue leaves, so only they publish revocation and get publication URLs (SPEC). */
export const PUBLISHING_KINDS: ReadonlySet<string> = new Set(['platform_leaf_issuer', 'tenant_intermediate']);

export interface PublicationBase {
  /** The current base, without a trailing slash; UNAVAILABLE while no address is known (nothing to embed). */
  url(): string;
  /** The URLs an issuer's certificates embed now (the one place they are made). */
  urlsFor(issuerId: string): PublicationUrls;
  /** Whether an address is known yet. */
  known(): boolean;
}

/**
 * SVC_PKI_PUBLICATION_BASE_URL when configured; else the address `follow` is given (the publication
 * listener's, or the management listener's when that one is off) once it is bound.
 */
export function createPublicationBase(configured: string | null, onChange: () => void) {
  let followed: string | null = null;
  const current = () => configured ?? followed;
  const base: PublicationBase & { follow(url: string): void } = {
    url() {
      const value = current();
      if (value === null) {
        throw unavailable('no publication address is known: certificates need one to embed (set SVC_PKI_PUBLICATION_BASE_URL or SVC_PKI_PUBLICATION_ADDR)');
      }
      return value;
    },
    urlsFor: (issuerId) => publicationUrls(base.url(), issuerId),
    known: () => current() !== null,
    follow(url) {
      const before = current();
      followed = url.replace(/\/+$/, '');
      if (current() !== before) onChange();
    },
  };
  return base;
}

/** The base URL of a bound listener: a wildcard host is reached as localhost (the machine itself). */
export function listenerBaseUrl(host: string, port: number): string {
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  const name = wildcard ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `http://${name}:${port}`;
}
