// GraphQL resolvers of the auth domain: thin adapters from arguments and context to the services.
import type { GraphqlContext } from '../graphql/context.js';
import type { GraphqlModule } from '../graphql/schema.js';
import { readSdl } from '../graphql/schema.js';
import { uuid } from '../validate.js';
import type { CredentialService } from './credentials.js';
import type { ExpiringCredentials } from './expiring.js';
import type { Login } from './login.js';
import type { Principal } from './principal.js';
import type { RequestMeta, Sessions } from './sessions.js';
import type { Signup } from './signup.js';

type Args = Record<string, any>;

export interface AuthResolverDeps {
  login: Login;
  signup: Signup;
  sessions: Sessions;
  credentials: CredentialService;
  expiringCredentials: ExpiringCredentials;
  meta(ctx: GraphqlContext): RequestMeta;
  mayViewSession(p: Principal, entityId: string): Promise<boolean>;
  signingKeys(p: Principal): Promise<unknown[]>;
  rotateSigningKeys(p: Principal, meta: RequestMeta): Promise<void>;
}

export function authGraphqlModule(d: AuthResolverDeps): GraphqlModule {
  const withCaller = <T>(fn: (p: Principal, args: Args, ctx: GraphqlContext) => Promise<T>) =>
    async (_: unknown, args: Args, ctx: GraphqlContext) => fn(await ctx.caller(), args, ctx);

  return {
    name: 'auth',
    sdl: readSdl('auth'),
    resolvers: {
      Query: {
        whoami: (_: unknown, _args: Args, ctx: GraphqlContext) => ctx.principal(),
        session: withCaller(async (p, args) => {
          const s = await d.sessions.get(uuid('id', args.id));
          if (!s || !(await d.mayViewSession(p, s.entity_id))) return null;
          return {
            id: s.id, entityId: s.entity_id, tenantId: s.tenant_id, expiresAt: s.expires_at.toISOString(),
            revokedAt: s.revoked_at ? s.revoked_at.toISOString() : null, createdAt: s.created_at.toISOString(),
          };
        }),
        credentials: withCaller((p, args) => d.credentials.credentials(p, uuid('entityId', args.entityId))),
        expiringCredentials: withCaller((p, args) => d.expiringCredentials(p, args)),
        accessTokens: withCaller((p, args) => d.credentials.accessTokens(p, {
          subjectId: args.subjectId == null ? null : uuid('subjectId', args.subjectId),
          status: args.status, limit: args.limit, offset: args.offset,
        })),
        signingKeys: withCaller((p) => d.signingKeys(p)),
      },
      Mutation: {
        signup: (_: unknown, args: Args, ctx: GraphqlContext) => d.signup.signup(args.input, d.meta(ctx)),
        login: (_: unknown, args: Args, ctx: GraphqlContext) => d.login.login(args.input, d.meta(ctx)),
        logout: withCaller((p, _args, ctx) => d.sessions.logout(p, d.meta(ctx))),
        refreshSession: withCaller(async (p, _args, ctx) => ({
          ...(await d.sessions.refresh(p, d.meta(ctx))), emailVerified: null, verificationRequired: false,
        })),
        createPassword: withCaller((p, args, ctx) => d.credentials.createPassword(p, uuid('entityId', args.entityId), args.password, d.meta(ctx))),
        changeOwnPassword: withCaller((p, args, ctx) => d.credentials.changeOwnPassword(p, args.currentPassword, args.newPassword, d.meta(ctx))),
        createSharedKey: withCaller((p, args, ctx) => d.credentials.createSharedKey(p, uuid('entityId', args.entityId), args.input ?? {}, d.meta(ctx))),
        revokeCredential: withCaller((p, args, ctx) => d.credentials.revokeCredential(
          p, uuid('credentialId', args.credentialId), args.entityId == null ? null : uuid('entityId', args.entityId), d.meta(ctx))),
        createAccessToken: withCaller((p, args, ctx) => d.credentials.createAccessToken(p, {
          ...args.input, subjectId: args.input.subjectId == null ? null : uuid('subjectId', args.input.subjectId),
        }, d.meta(ctx))),
        replaceAccessTokenPermissions: withCaller((p, args, ctx) =>
          d.credentials.replaceAccessTokenPermissions(p, uuid('credentialId', args.credentialId), args.permissions, d.meta(ctx))),
        revokeAccessToken: withCaller((p, args, ctx) => d.credentials.revokeAccessToken(p, uuid('credentialId', args.credentialId), d.meta(ctx))),
        rotateSigningKeys: withCaller(async (p, _args, ctx) => {
          await d.rotateSigningKeys(p, d.meta(ctx));
          return true;
        }),
      },
    },
  };
}
