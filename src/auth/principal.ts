// Who is calling: the identity a verified bearer token or device key stands for. Carries no permissions.

export type EntityKind = 'human' | 'device' | 'service' | 'workload' | 'application';

export interface Principal {
  entityId: string;
  entityKind: EntityKind;
  /** The entity's owning tenant; null for global entities (humans, platform services). */
  homeTenantId: string | null;
  /** The tenant context chosen at login (tenantId/tenantAlias), if any. */
  tenantId: string | null;
  sessionId: string | null;
  /** Set when the caller used an access token (scoped or not) or a shared key. */
  credentialId: string | null;
  credentialKind: 'session' | 'access_token' | 'shared_key';
  /** Scoped access tokens are limited by their stored ceiling on every decision. */
  scoped: boolean;
}
