// Test certificates made with openssl: a CA, a server certificate for 127.0.0.1 and localhost, and a client
// certificate, P-256, valid for a day, in a fresh temporary directory; the paths are returned.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export function makeCertificates(): Record<'ca' | 'caKey' | 'cert' | 'key' | 'clientCert' | 'clientKey', string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'test-tls-'));
  const f = (name: string) => path.join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=test-ca', '-days', '1');
  writeFileSync(f('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  for (const [name, cn, ext] of [['server', '127.0.0.1', true], ['client', 'test-client', false]] as const) {
    ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f(`${name}.pem`), '-days', '1', ...(ext ? ['-extfile', f('san.ext')] : []));
  }
  return { ca: f('ca.pem'), caKey: f('ca.key'), cert: f('server.pem'), key: f('server.key'), clientCert: f('client.pem'), clientKey: f('client.key') };
}
