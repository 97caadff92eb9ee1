// Builds test/helpers/pkcs11-shim.c (a slow or failing PKCS#11 module over SoftHSM2) with cc into a
// temporary directory and gives the files that steer it. Production code has no test hooks: the service
// simply loads this module through SVC_PKI_PKCS11_MODULE_PATH.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../../src/paths.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Pkcs11Shim {
  modulePath: string;
  /** 'pass' | 'sleep <ms>' | 'fail <ckr>' | 'flaky <ckr>', read before every C_Sign. */
  set(mode: string): void;
  /** C_Sign calls so far (attempts, retries included). */
  calls(): number;
  /** Sleeping C_Sign calls that have returned so far. */
  slept(): number;
}

export const CKR_DEVICE_ERROR = 0x30;
export const CKR_GENERAL_ERROR = 0x05;

export function buildPkcs11Shim(t: Teardown): Pkcs11Shim {
  const dir = mkdtempSync(path.join(tmpdir(), 'pkcs11-shim-'));
  const modulePath = path.join(dir, 'libpkcs11shim.so');
  execFileSync('cc', ['-shared', '-fPIC', '-O1', '-o', modulePath, '-I', path.join(projectRoot, 'node_modules/pkcs11js/includes/pkcs11'), path.join(projectRoot, 'test/helpers/pkcs11-shim.c'), '-ldl'], { stdio: 'pipe' });
  const control = path.join(dir, 'control');
  const log = path.join(dir, 'calls.log');
  writeFileSync(control, 'pass');
  writeFileSync(log, '');
  // Read by the module through getenv in whichever thread signs: the real environment, set from the main thread.
  process.env.PKCS11_SHIM_CONTROL = control;
  process.env.PKCS11_SHIM_LOG = log;
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return {
    modulePath,
    set: (mode) => writeFileSync(control, mode),
    calls: () => readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith('call ')).length,
    slept: () => readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith('slept ')).length,
  };
}
