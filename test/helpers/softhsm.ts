// A fresh SoftHSM2 token for a test file: its own token directory and SOFTHSM2_CONF in a temporary
// directory, initialised with softhsm2-util; returns the service settings that reach it, removed at teardown.
// SoftHSM reads SOFTHSM2_CONF once per process (at the first C_Initialize), so this sets it in the real
// environment before any worker loads the module: one token directory per test file.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const SOFTHSM_MODULE = '/usr/lib/softhsm/libsofthsm2.so';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface SoftHsmToken {
  label: string;
  pin: string;
  soPin: string;
  dir: string;
  /** SVC_PKI_CA_KEY_BACKEND=pkcs11 and the SVC_PKI_PKCS11_* that reach this token through `modulePath`. */
  env: Record<string, string>;
}

export function createSoftHsmToken(t: Teardown, options: { label?: string; pin?: string; modulePath?: string } = {}): SoftHsmToken {
  const dir = mkdtempSync(path.join(tmpdir(), 'softhsm-'));
  const tokens = path.join(dir, 'tokens');
  mkdirSync(tokens);
  const conf = path.join(dir, 'softhsm2.conf');
  writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`);
  const label = options.label ?? `test-${path.basename(dir).slice(-6)}`;
  const pin = options.pin ?? '1234';
  const soPin = '87654321';
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--pin', pin, '--so-pin', soPin], {
    env: { ...process.env, SOFTHSM2_CONF: conf },
    stdio: 'pipe',
  });
  process.env.SOFTHSM2_CONF = conf;
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return {
    label,
    pin,
    soPin,
    dir,
    env: {
      SVC_PKI_CA_KEY_BACKEND: 'pkcs11',
      SVC_PKI_PKCS11_MODULE_PATH: options.modulePath ?? SOFTHSM_MODULE,
      SVC_PKI_PKCS11_TOKEN_LABEL: label,
      SVC_PKI_PKCS11_USER_PIN: pin,
    },
  };
}
