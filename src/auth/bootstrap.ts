// The first administrator's password: set at boot from SVC_ADMIN_SECRET (or ADMIN_SECRET) when the
// seeded admin has none; generated and printed once on the embedded default; never reset on restart.
import { randomBytes } from 'node:crypto';
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import * as cq from './credential-queries.js';
import { hashPassword, type ScryptParams } from './passwords.js';

export interface BootstrapSettings {
  adminEntityId: string;
  adminIdentifier: string;
  adminSecret: string | undefined;
  /** No DATABASE_URL: a developer's machine, where a generated password printed once is the friendly default. */
  embedded: boolean;
  scrypt: ScryptParams;
}

export async function bootstrapAdmin(sql: Sql, s: BootstrapSettings, log: Logger): Promise<'exists' | 'configured' | 'generated' | 'none'> {
  let generated: string | undefined;
  const outcome = await sql.begin(async (tx) => {
    await cq.lockAuthSetup(tx);
    const [admin] = await tx<{ id: string }[]>`select id from entities where id = ${s.adminEntityId} and deleted_at is null`;
    if (!admin) {
      log.warn('administrator entity not found; no bootstrap password set', { entityId: s.adminEntityId });
      return 'none' as const;
    }
    if (s.adminIdentifier.includes('@')) {
      await tx`
        insert into entity_emails (entity_id, email, verified_at) values (${s.adminEntityId}, ${s.adminIdentifier.toLowerCase()}, now())
        on conflict do nothing`;
    }
    if (await cq.selectPassword(tx, s.adminEntityId)) return 'exists' as const;
    let secret = s.adminSecret;
    if (!secret) {
      if (!s.embedded) return 'none' as const;
      secret = generated = randomBytes(18).toString('base64url');
    }
    await cq.insertCredential(tx, {
      entityId: s.adminEntityId, kind: 'password', secretHash: await hashPassword(secret, s.scrypt), createdBy: null,
      description: 'bootstrap administrator password',
    });
    return generated ? ('generated' as const) : ('configured' as const);
  });
  if (outcome === 'generated') {
    // The one deliberate exception to "secrets are never logged": the operator has no other way to learn it.
    log.warn('GENERATED ADMINISTRATOR PASSWORD (shown once; set SVC_ADMIN_SECRET to choose it)', {
      identifier: s.adminIdentifier, password: generated,
    });
  } else if (outcome === 'none') {
    log.warn('the administrator has no password: set SVC_ADMIN_SECRET to create one at start', { identifier: s.adminIdentifier });
  } else if (outcome === 'configured') {
    log.info('administrator password created from SVC_ADMIN_SECRET', { identifier: s.adminIdentifier });
  }
  return outcome;
}
