// The publication base (src/pki/publication/publication-base.ts): a configured base wins over any bound address; an
// unconfigured one follows the listener it is given and tells the registry to rebuild issuer extensions;
// with no address known, asking for URLs is a clear UNAVAILABLE, not a URL that reaches nothing.
import t from 'tap';
import { createPublicationBase, listenerBaseUrl } from '../../../src/pki/publication/publication-base.js';

t.test('a configured base wins; an unconfigured one follows the bound listener', async (t) => {
  let changes = 0;
  const configured = createPublicationBase('http://pki.example.com/pub', () => changes++);
  configured.follow('http://127.0.0.1:8089');
  t.equal(configured.url(), 'http://pki.example.com/pub');
  t.same(configured.urlsFor('abc'), {
    ocspUrl: 'http://pki.example.com/pub/certs/issuers/abc/ocsp',
    caIssuersUrl: 'http://pki.example.com/pub/certs/issuers/abc/ca.crt',
    crlDistributionPointUrl: 'http://pki.example.com/pub/certs/issuers/abc/crl',
  });
  t.equal(changes, 0, 'following changes nothing when the base is configured');

  const following = createPublicationBase(null, () => changes++);
  t.equal(following.known(), false);
  const err = t.throws(() => following.urlsFor('abc')) as { code?: string; kind?: string; message: string };
  t.equal(err.kind, 'UNAVAILABLE');
  t.match(err.message, /SVC_PKI_PUBLICATION_BASE_URL/);
  following.follow('http://localhost:41234/');
  t.equal(following.url(), 'http://localhost:41234');
  t.equal(changes, 1, 'a new address drops what was built from the old one');
  following.follow('http://localhost:41234');
  t.equal(changes, 1, 'the same address again changes nothing');
});

t.test('a bound listener as a URL', async (t) => {
  t.equal(listenerBaseUrl('0.0.0.0', 8089), 'http://localhost:8089', 'a wildcard host is reached as localhost');
  t.equal(listenerBaseUrl('::', 8089), 'http://localhost:8089');
  t.equal(listenerBaseUrl('127.0.0.1', 41234), 'http://127.0.0.1:41234');
  t.equal(listenerBaseUrl('::1', 41234), 'http://[::1]:41234');
  t.equal(listenerBaseUrl('pki.internal', 80), 'http://pki.internal:80');
});
