// The verdict of the whole-run secret scan (test/helpers/secret-scan.ts), given by test/run.mjs once the
// test command is over: every leak the test processes reported fails the run, except the canary that
// test/foundation/secret-scan-canary.test.ts plants, which must be found whenever that file ran.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const CANARY_FILE = 'test/foundation/secret-scan-canary.test.js';

function entries(dir, kind) {
  return readdirSync(dir).filter((f) => f.startsWith(`${kind}-`))
    .flatMap((f) => readFileSync(join(dir, f), 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line)));
}

/** Prints the verdict; returns whether the run passes it. */
export function secretScanVerdict(dir) {
  const scanned = entries(dir, 'scanned');
  const found = entries(dir, 'leak');
  const files = new Set(scanned.map((s) => s.file));
  const databases = scanned.filter((s) => 'database' in s && !s.error).length;
  const logs = scanned.filter((s) => 'log' in s).length;
  const mib = (scanned.reduce((sum, s) => sum + s.bytes, 0) / 2 ** 20).toFixed(1);
  const secrets = [...files].reduce((sum, f) => sum + Math.max(...scanned.filter((s) => s.file === f).map((s) => s.secrets)), 0);
  const canary = found.filter((l) => l.file === CANARY_FILE && l.where === 'table entities' && /sent/.test(l.origin));
  const leaks = found.filter((l) => !(l.file === CANARY_FILE && l.where === 'table entities'));
  console.log(`# secret scan: ${files.size} test files, ${databases} databases and ${logs} service logs (${mib} MiB), ${secrets} secrets the tests sent or were answered`);
  for (const s of scanned.filter((s) => s.error)) console.log(`# secret scan: a database of ${s.file} could not be searched: ${s.error}`);
  let pass = true;
  for (const l of leaks) {
    console.log(`# secret scan: LEAK in ${l.file}: a secret (${l.origin}) found in ${l.where}: …${l.context}…`);
    pass = false;
  }
  if (files.has(CANARY_FILE) && canary.length !== 1) {
    console.log(`# secret scan: the canary ${CANARY_FILE} plants was not found exactly once (${canary.length}): the scan is not working`);
    pass = false;
  }
  if (pass) console.log(`# secret scan: no secret in any log or database${files.has(CANARY_FILE) ? ' (and the planted canary was found)' : ''}`);
  return pass;
}
