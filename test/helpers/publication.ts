// Revocation publication as relying parties see it: openssl's ocsp and crl commands and curl run against
// the running service (asynchronously: the service answers on this process's event loop), and fixtures
// that issue and revoke leaves through the public GraphQL API.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ISSUE_CSR, REVOKE, opensslCsr } from './pki.js';
import { ok } from './management.js';
import type { TestService } from './service.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

const run = promisify(execFile);

/** Runs a command; resolves with stdout and stderr together (openssl prints verification results on stderr). */
export async function sh(cmd: string, args: string[], options: { input?: Buffer; allowFail?: boolean } = {}): Promise<string> {
  try {
    const child = run(cmd, args, { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
    if (options.input) {
      child.child.stdin?.end(options.input);
    }
    const { stdout, stderr } = await child;
    return `${stdout.toString()}${stderr.toString()}`;
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer; message: string };
    const out = `${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`;
    if (options.allowFail) return out;
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.message}\n${out}`);
  }
}

export function tempDir(t: Teardown, prefix = 'pki-pub-'): (name: string, content?: string | Buffer) => string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return (name, content) => {
    const f = path.join(dir, name);
    if (content !== undefined) writeFileSync(f, content);
    return f;
  };
}

export interface Leaf {
  credentialId: string;
  issuerId: string;
  serialNumber: string;
  certificatePem: string;
  chainPem: string;
}

let counter = 0;
export async function issueLeaf(ts: TestService, token: string, caDir: string, entityId: string): Promise<Leaf> {
  const out = (await ok(ts, token, ISSUE_CSR, { i: { entityId, csrPem: opensslCsr(caDir).csrPem, idempotencyKey: `pub-${++counter}-${Date.now()}` } }))
    .issueCertificateFromCsrV2;
  return { ...out.certificate, chainPem: out.chainPem };
}

export async function revokeLeaf(ts: TestService, token: string, leaf: Leaf, reason: string): Promise<void> {
  await ok(ts, token, REVOKE, { i: { credentialId: leaf.credentialId, reason } });
}

/** The first certificate of a PEM chain: a leaf's issuer when given the chain the service returns. */
export function firstPem(chainPem: string): string {
  const m = chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/);
  if (!m) throw new Error('no certificate in chain');
  return m[0];
}

/** `openssl ocsp` against the service; returns its whole output (status line, times, reason, verification). */
export function opensslOcsp(base: string, issuerId: string, files: { issuer: string; cafile: string; cert?: string; serial?: string }, extra: string[] = []): Promise<string> {
  const target = files.cert ? ['-cert', files.cert] : ['-serial', files.serial as string];
  return sh('openssl', ['ocsp', '-issuer', files.issuer, ...target, '-url', `${base}/certs/issuers/${issuerId}/ocsp`, '-CAfile', files.cafile, '-timeout', '10', ...extra], { allowFail: true });
}

/** A raw HTTP answer: status, lower-cased headers, body bytes. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** One raw exchange: writes `parts` (with `gapMs` between them), reads until the server closes. */
export function rawExchange(port: number, parts: (string | Buffer)[], gapMs = 0): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks);
      const end = raw.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no answer head: ${raw.toString('latin1')}`));
      const [line, ...fields] = raw.subarray(0, end).toString('latin1').split('\r\n');
      const headers = Object.fromEntries(fields.map((f) => [f.slice(0, f.indexOf(':')).toLowerCase(), f.slice(f.indexOf(':') + 1).trim()]));
      resolve({ status: Number(line?.split(' ')[1]), headers, body: raw.subarray(end + 4) });
    });
    void (async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        socket.write(part);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    })();
  });
}
