// Enrollment listener fixtures: its TLS certificate (for 127.0.0.1), the env that enables it, and curl and
// openssl run as real clients. Asynchronous on purpose: the service runs in the test's own process, so a
// blocking child process would stall the server it talks to.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { CaFiles } from './pki.js';

const run = promisify(execFile);

/** A self-signed server certificate for 127.0.0.1 and the env enabling the enrollment listener on port 0. */
export async function enrollmentEnv(ca: CaFiles, extra: Record<string, string> = {}): Promise<{ env: Record<string, string>; serverCert: string }> {
  const cert = ca.file('enroll-server.pem');
  const key = ca.file('enroll-server.key');
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert,
    '-subj', '/CN=enrollment test listener', '-days', '2', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost']);
  return {
    serverCert: cert,
    env: {
      ...ca.env,
      SVC_PKI_ENROLLMENT_ENABLED: 'true',
      SVC_PKI_ENROLLMENT_LISTEN_ADDR: '127.0.0.1:0',
      SVC_PKI_ENROLLMENT_TLS_CERT_PATH: cert,
      SVC_PKI_ENROLLMENT_TLS_KEY_PATH: key,
      ...extra,
    },
  };
}

export interface CurlResult {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/** curl against the enrollment listener; `args` are curl's own (--cert, --key, -H, --data-binary ...). */
export async function curl(url: string, serverCert: string, args: string[] = []): Promise<CurlResult> {
  const { stdout } = await run('curl', ['-sS', '--cacert', serverCert, '-D', '-', ...args, url], { maxBuffer: 10 * 1024 * 1024 });
  // -D - prints the header block(s) first (a 100 Continue has its own), then the body.
  let rest = stdout;
  let last: string[] = [];
  while (/^HTTP\/[\d.]+ \d{3}/.test(rest)) {
    const end = rest.indexOf('\r\n\r\n');
    last = rest.slice(0, end).split('\r\n');
    rest = rest.slice(end + 4);
    if (!/^HTTP\/[\d.]+ 1\d\d/.test(last[0]!)) break;
  }
  const body = rest;
  const status = Number(/^HTTP\/[\d.]+ (\d{3})/.exec(last[0] ?? '')?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of last.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status, body, headers };
}

/** POST JSON with curl; returns the parsed body too. */
export async function curlJson(url: string, serverCert: string, body: unknown, args: string[] = []) {
  const r = await curl(url, serverCert, ['-X', 'POST', '-H', 'content-type: application/json', '--data-binary', JSON.stringify(body), ...args]);
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(r.body);
  } catch {
    json = { raw: r.body };
  }
  return { ...r, json };
}

export async function openssl(args: string[], input?: string): Promise<string> {
  const child = run('openssl', args);
  if (input !== undefined) {
    child.child.stdin!.end(input);
  }
  return (await child).stdout;
}

/** A certs-only PKCS#7 in base64 (an EST answer) → its certificates as PEM, through `openssl pkcs7`. */
export async function pkcs7Certs(dir: string, base64: string): Promise<string> {
  const name = path.join(dir, `p7-${Math.random().toString(36).slice(2)}`);
  writeFileSync(`${name}.b64`, base64);
  await run('openssl', ['base64', '-d', '-in', `${name}.b64`, '-out', `${name}.der`]);
  await run('openssl', ['pkcs7', '-inform', 'DER', '-in', `${name}.der`, '-print_certs', '-out', `${name}.pem`]);
  return readFileSync(`${name}.pem`, 'utf8');
}

/** A CSR in the form EST sends it: base64 of the DER, in a file for curl --data-binary @file. */
export async function estCsrFile(dir: string, keyPath?: string): Promise<{ file: string; keyPath: string; csrDerFile: string }> {
  const id = Math.random().toString(36).slice(2, 10);
  const key = keyPath ?? path.join(dir, `est-${id}.key`);
  const der = path.join(dir, `est-${id}.csr.der`);
  const args = ['req', '-new', '-nodes', '-subj', '/CN=est device', '-outform', 'DER', '-out', der];
  if (keyPath) args.push('-key', keyPath);
  else args.push('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-keyout', key);
  await run('openssl', args);
  const b64 = path.join(dir, `est-${id}.csr.b64`);
  await run('openssl', ['base64', '-in', der, '-out', b64]);
  return { file: b64, keyPath: key, csrDerFile: der };
}
