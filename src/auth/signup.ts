// Self-registration of humans (when enabled): entity + lowercased unique email + password + membership
// of authenticated-users, and the email verification flow when configured.
import type { AuditWriter } from '../audit/writer.js';
import type { Sql } from '../db/client.js';
import { forbidden, invalidInput } from '../errors.js';
import type { Logger } from '../log.js';
import { boundedJson, type JsonBounds } from '../validate.js';
import * as cq from './credential-queries.js';
import type { Mailer } from './mailer.js';
import { checkPasswordPolicy, hashPassword, type ScryptParams } from './passwords.js';
import * as q from './queries.js';
import { newOpaqueToken, type KeyedHash } from './secrets.js';
import type { RequestMeta } from './sessions.js';

export const AUTHENTICATED_USERS_GROUP = '00000000-0000-0000-0000-000000000005';
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const VERIFICATION_TTL_SECS = 86_400;

export interface SignupInput {
  name?: string | null;
  email?: string | null;
  password?: string | null;
  attributes?: unknown;
}

export function createSignup(deps: {
  sql: Sql; audit: AuditWriter; mailer: Mailer; hash: () => KeyedHash; log: Logger;
  settings: { enabled: boolean; verificationRequired: boolean; scrypt: ScryptParams; minPasswordChars: number; publicBaseUrl: string; documents: JsonBounds };
}) {
  const { sql, audit, mailer, settings } = deps;

  async function sendVerification(entityId: string, email: string): Promise<void> {
    const token = newOpaqueToken();
    await q.insertVerificationToken(sql, { hash: deps.hash()(token), entityId, email, ttlSecs: VERIFICATION_TTL_SECS });
    const link = new URL('/auth/email/verify', settings.publicBaseUrl);
    link.searchParams.set('token', token);
    try {
      await mailer.send({
        to: email,
        subject: 'Verify your email address',
        text: `Confirm your email address by opening ${link.toString()}\nThe token is: ${token}\nIt expires in 24 hours.`,
      });
    } catch (err) {
      // The account exists either way; the user can ask for another message.
      deps.log.error('sending the verification email failed', { err: String(err) });
    }
  }

  return {
    async signup(input: SignupInput, meta: RequestMeta) {
      if (!settings.enabled) throw forbidden('sign up is not enabled');
      const name = (input.name ?? '').trim();
      const email = (input.email ?? '').trim().toLowerCase();
      const password = input.password ?? '';
      const attributes = input.attributes ?? {};
      if (!name) throw invalidInput('name is required');
      if (name.length > 200) throw invalidInput('name must be at most 200 characters');
      if (!EMAIL.test(email) || email.length > 320) throw invalidInput('email is not a valid address');
      const problem = checkPasswordPolicy(password, settings.minPasswordChars);
      if (problem) throw invalidInput(problem);
      if (typeof attributes !== 'object' || attributes === null || Array.isArray(attributes)) throw invalidInput('attributes must be a JSON object');
      boundedJson('attributes', attributes, settings.documents);
      const hash = await hashPassword(password, settings.scrypt);
      const entityId = await sql.begin(async (tx) => {
        const id = await q.insertHuman(tx, { name, attributes: attributes as Record<string, unknown> });
        await q.insertEmail(tx, id, email, !settings.verificationRequired);
        await cq.insertCredential(tx, { entityId: id, kind: 'password', secretHash: hash, createdBy: id });
        await q.addToPrincipalGroup(tx, AUTHENTICATED_USERS_GROUP, id);
        return id;
      });
      audit.record({
        event: 'auth.signup', outcome: 'allow', actorEntityId: entityId, targetKind: 'entity', targetId: entityId,
        requestId: meta.requestId, details: { ip: meta.ip, verification_required: settings.verificationRequired },
      });
      if (settings.verificationRequired) await sendVerification(entityId, email);
      return { entityId, email, verificationRequired: settings.verificationRequired };
    },

    async verifyEmail(token: string, meta: RequestMeta): Promise<boolean> {
      if (!token || token.length > 256) throw invalidInput('token is required');
      const row = await q.consumeVerificationToken(sql, deps.hash()(token));
      if (!row) throw invalidInput('verification token is invalid or expired');
      audit.record({ event: 'auth.email.verify', outcome: 'allow', actorEntityId: row.entity_id, targetKind: 'entity', targetId: row.entity_id, requestId: meta.requestId });
      return true;
    },

    /** Always answers the same, so it cannot tell who is registered. */
    async resendVerification(emailInput: string): Promise<void> {
      const email = emailInput.trim().toLowerCase();
      if (!settings.verificationRequired || !EMAIL.test(email)) return;
      const row = await q.selectUnverifiedEmail(sql, email);
      if (row) await sendVerification(row.entity_id, row.email);
    },
  };
}

export type Signup = ReturnType<typeof createSignup>;
