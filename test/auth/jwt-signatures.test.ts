// Issue 21 point 7: one valid token string per session. ECDSA signatures are malleable ((r, s) and
// (r, n - s) both verify) and base64url has spare bits in its last character; either would give a
// stolen or revoked-by-string token a second spelling. Only low-S signatures in canonical base64url are
// issued and accepted.
import { generateKeyPairSync, verify } from 'node:crypto';
import t from 'tap';
import { signJwt, verifyJwt } from '../../src/auth/jwt.js';
import { ADMIN_SECRET, login, startAuthService } from '../helpers/auth.js';

const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const sOf = (signature: Buffer) => BigInt(`0x${signature.subarray(32).toString('hex')}`);

/** The same signature with s replaced by n - s: valid ECDSA, another token string. */
function twin(token: string): string {
  const [h, c, s] = token.split('.') as [string, string, string];
  const sig = Buffer.from(s, 'base64url');
  const flipped = Buffer.from((N - sOf(sig)).toString(16).padStart(64, '0'), 'hex');
  return `${h}.${c}.${Buffer.concat([sig.subarray(0, 32), flipped]).toString('base64url')}`;
}

/** The same bytes spelled differently: the last base64url character's 4 unused bits set. */
function respelled(token: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(token.at(-1) as string);
  return `${token.slice(0, -1)}${alphabet[(last & 0b110000) | 0b1111]}`;
}

t.test('signing issues low S only; verification refuses the high-S twin and a re-spelled signature', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: 'iss', aud: 'aud', sub: '00000000-0000-0000-0000-000000000001', sid: '00000000-0000-0000-0000-0000000000aa', tid: null, iat: now, exp: now + 60 };
  const expect = { iss: 'iss', aud: 'aud', now };
  let twinsVerifiedByEcdsa = 0;
  for (let i = 0; i < 40; i++) {
    const token = signJwt(claims, 'k1', privateKey);
    const sig = Buffer.from(token.split('.')[2] as string, 'base64url');
    t.ok(sOf(sig) <= N >> 1n, `token ${i}: s in the low half`);
    t.equal(verifyJwt(token, () => publicKey, expect).ok, true);
    const other = twin(token);
    const [h, c, s] = other.split('.') as [string, string, string];
    if (verify('sha256', Buffer.from(`${h}.${c}`), { key: publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'))) twinsVerifiedByEcdsa++;
    t.same(verifyJwt(other, () => publicKey, expect), { ok: false, reason: 'bad_signature' }, `token ${i}: its high-S twin is refused`);
    const respelt = respelled(token);
    t.not(respelt, token);
    t.same(Buffer.from(respelt.split('.')[2] as string, 'base64url'), sig, 'the same signature bytes');
    t.same(verifyJwt(respelt, () => publicKey, expect), { ok: false, reason: 'bad_signature' }, `token ${i}: re-spelled, refused`);
  }
  t.equal(twinsVerifiedByEcdsa, 40, 'every twin is a valid ECDSA signature: only the rule refuses it');
});

t.test('over HTTP: the twin of a live session token is not a second key to it', async (t) => {
  const ts = await startAuthService(t);
  const { token } = await login(ts, 'admin', ADMIN_SECRET);
  const introspect = async (bearer: string) => (await fetch(`${ts.url()}/auth/introspect`, { headers: { authorization: `Bearer ${bearer}` } })).json();
  t.match(await introspect(token), { active: true });
  t.same(await introspect(twin(token)), { active: false });
  t.same(await introspect(respelled(token)), { active: false });
});
