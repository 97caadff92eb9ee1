// The JWT signing keyring (primary signs; standby is published ahead of rotation; retired keys verify
// until their last token expired) and the token-hash key, both kept in PostgreSQL, sealed under
// SVC_KEY_ENCRYPTION_KEY when it is configured and stored plaintext (reported by health) when not.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import type { Queryable, Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import type { Logger } from '../log.js';
import * as q from './credential-queries.js';
import { kekId as kekIdOf, seal, unseal } from './secrets.js';

export const KEYS_TOPIC = 'auth.keys';
const TOKEN_HASH_KEY = 'token_hash_key';

export interface Jwk {
  kty: string;
  crv: string;
  x: string;
  y: string;
  kid: string;
  use: 'sig';
  alg: 'ES256';
}

export interface SigningKeyInfo {
  kid: string;
  status: 'primary' | 'standby' | 'retired';
  algorithm: 'ES256';
  createdAt: string;
  storageMode: 'encrypted' | 'plaintext';
  keyEncryptionKeyId: string | null;
  verifyUntil: string | null;
}

export interface Keyring {
  /** Creates what is missing, upgrades plaintext rows when a KEK is configured, loads everything. */
  init(): Promise<void>;
  reload(): Promise<void>;
  signer(): { kid: string; key: KeyObject };
  verificationKey(kid: string): KeyObject | undefined;
  jwks(): { keys: Jwk[] };
  /** Standby becomes primary, primary retires (verifying for `verifySecs` more), a new standby appears. */
  rotate(verifySecs: number): Promise<void>;
  keys(): SigningKeyInfo[];
  tokenHashKey(): Buffer;
  state(): { configured_key_id: string | null; encrypted_count: number; plaintext_count: number; total_count: number; plaintext_allowed: boolean };
}

/** RFC 7638 thumbprint: a kid derived from the key itself. */
function thumbprint(jwk: { crv: string; kty: string; x: string; y: string }): string {
  return createHash('sha256').update(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y })).digest('base64url');
}

export function createKeyring(deps: { sql: Sql; hub: NotifyHub; kek: Buffer | undefined; log: Logger }): Keyring {
  const { sql, hub, kek, log } = deps;
  const kekId = kek ? kekIdOf(kek) : null;
  let rows: q.SigningKeyRow[] = [];
  let publicKeys = new Map<string, KeyObject>();
  let primary: { kid: string; key: KeyObject } | undefined;
  let hashKey: Buffer | undefined;
  let counts = { encrypted: 0, plaintext: 0 };

  const aad = (kid: string) => `signing_key:${kid}`;

  function open(stored: Buffer, mode: string, storedKekId: string | null, label: string, aadText: string): Buffer {
    if (mode === 'plaintext') return stored;
    if (!kek || storedKekId !== kekId) {
      throw new Error(`${label} is encrypted under key-encryption key ${storedKekId}, but SVC_KEY_ENCRYPTION_KEY `
        + (kek ? `is ${kekId}` : 'is not set') + ': configure the key it was sealed with');
    }
    return unseal(kek, stored, aadText);
  }

  function protect(plain: Buffer, aadText: string): { material: Buffer; mode: 'encrypted' | 'plaintext' } {
    return kek ? { material: seal(kek, plain, aadText), mode: 'encrypted' } : { material: plain, mode: 'plaintext' };
  }

  async function newSigningKey(tx: Queryable, status: 'primary' | 'standby'): Promise<void> {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' }) as { kty: string; crv: string; x: string; y: string };
    const kid = thumbprint(jwk);
    const sealed = protect(privateKey.export({ format: 'der', type: 'pkcs8' }), aad(kid));
    await q.insertSigningKey(tx, {
      kid, status, publicJwk: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y, kid, use: 'sig', alg: 'ES256' },
      privateKey: sealed.material, storageMode: sealed.mode, kekId: sealed.mode === 'encrypted' ? kekId : null,
    });
  }

  async function load(): Promise<void> {
    const fresh = await q.selectSigningKeys(sql);
    const keys = new Map<string, KeyObject>();
    let signer: typeof primary;
    const seen = { encrypted: 0, plaintext: 0 };
    for (const row of fresh) {
      keys.set(row.kid, createPublicKey({ key: row.public_jwk as never, format: 'jwk' }));
      seen[row.storage_mode]++;
      if (row.status === 'primary') {
        const der = open(row.private_key, row.storage_mode, row.key_encryption_key_id, `signing key ${row.kid}`, aad(row.kid));
        signer = { kid: row.kid, key: createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }) };
      }
    }
    if (!signer) throw new Error('no primary signing key');
    rows = fresh;
    publicKeys = keys;
    primary = signer;
    counts = seen;
  }

  const keyring: Keyring = {
    async init() {
      await sql.begin(async (tx) => {
        await q.lockAuthSetup(tx);
        const all = await q.selectAllSigningKeys(tx);
        for (const row of all) {
          // Opening every stored key proves the configured KEK is the right one before anything relies on it.
          const der = open(row.private_key, row.storage_mode, row.key_encryption_key_id, `signing key ${row.kid}`, aad(row.kid));
          if (row.storage_mode === 'plaintext' && kek) {
            await q.updateSigningKeyStorage(tx, row.kid, seal(kek, der, aad(row.kid)), kekId as string);
            log.info('signing key sealed under the configured key-encryption key', { kid: row.kid });
          }
        }
        if (!all.some((r) => r.status === 'primary')) await newSigningKey(tx, 'primary');
        if (!all.some((r) => r.status === 'standby')) await newSigningKey(tx, 'standby');

        let stored = await q.selectAuthKey(tx, TOKEN_HASH_KEY);
        if (!stored) {
          const sealed = protect(randomBytes(32), `auth_key:${TOKEN_HASH_KEY}`);
          await q.insertAuthKey(tx, { name: TOKEN_HASH_KEY, material: sealed.material, storageMode: sealed.mode, kekId: sealed.mode === 'encrypted' ? kekId : null });
          stored = await q.selectAuthKey(tx, TOKEN_HASH_KEY);
        }
        const s = stored as NonNullable<typeof stored>;
        hashKey = open(s.material, s.storage_mode, s.key_encryption_key_id, 'the token hash key', `auth_key:${TOKEN_HASH_KEY}`);
        if (s.storage_mode === 'plaintext' && kek) {
          await q.updateAuthKeyStorage(tx, TOKEN_HASH_KEY, seal(kek, hashKey, `auth_key:${TOKEN_HASH_KEY}`), kekId as string);
        }
      });
      if (!kek) log.warn('SVC_KEY_ENCRYPTION_KEY is not set: JWT signing keys and the token hash key are stored in plaintext');
      await load();
      hub.subscribe(KEYS_TOPIC, () => {
        load().catch((err: unknown) => log.error('reloading signing keys failed', { err }));
      });
      hub.onReconnect(() => {
        load().catch((err: unknown) => log.error('reloading signing keys failed', { err }));
      });
    },
    reload: load,
    signer() {
      if (!primary) throw new Error('keyring not initialised');
      return primary;
    },
    verificationKey(kid) {
      return publicKeys.get(kid);
    },
    jwks() {
      return { keys: rows.map((r) => r.public_jwk as unknown as Jwk) };
    },
    async rotate(verifySecs) {
      await sql.begin(async (tx) => {
        await q.lockAuthSetup(tx);
        await q.rotateSigningKeyRows(tx, verifySecs);
        const now = await q.selectAllSigningKeys(tx);
        if (!now.some((r) => r.status === 'primary')) await newSigningKey(tx, 'primary');
        await newSigningKey(tx, 'standby');
        await hub.notify(KEYS_TOPIC, {}, tx);
      });
      await load();
    },
    keys() {
      return rows.map((r) => ({
        kid: r.kid, status: r.status, algorithm: 'ES256', createdAt: r.created_at.toISOString(), storageMode: r.storage_mode,
        keyEncryptionKeyId: r.key_encryption_key_id, verifyUntil: r.verify_until ? r.verify_until.toISOString() : null,
      }));
    },
    tokenHashKey() {
      if (!hashKey) throw new Error('keyring not initialised');
      return hashKey;
    },
    state() {
      return {
        configured_key_id: kekId,
        encrypted_count: counts.encrypted,
        plaintext_count: counts.plaintext,
        total_count: counts.encrypted + counts.plaintext,
        plaintext_allowed: !kek,
      };
    },
  };
  return keyring;
}
