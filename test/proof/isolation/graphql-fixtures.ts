// How to fill the arguments of every GraphQL operation that takes an object id or a tenant id, as data
// (one entry per operation, like a SpiceDB relationship fixture). `$key` names an object of the world
// (world.ts): the target tenant's, and for the other tenant's admin also its own, in every own/foreign
// combination; `#key` names a constant. An entry may list several argument sets. `answers` lists callers
// for whom an answer is legitimate (the matrix still checks it carries nothing of the target's that the
// caller may not read, counts nothing hidden and changes nothing), with the reason.
// The matrix introspects the live schema: an operation taking an id with no entry here fails it, and so
// does an operation taking no id that is not in NO_IDS.
import type { CallerName } from './world.js';

export interface GraphqlRow {
  args: Record<string, unknown> | Record<string, unknown>[];
  answers?: Partial<Record<CallerName, string>>;
  /** A Mutation field that only reads (the runtime checks): judged like a query. */
  readOnly?: true;
}

/** Tenant readers read these kinds of the tenant: a tenant-scope read covers them (the device reads its channel). */
const READ = { reader: 'a tenant-scope read covers this kind' };
const own = (why: string) => ({ reader: why, device: why, scopedToken: why, otherAdmin: why });

export const GRAPHQL: Record<string, GraphqlRow> = {
  // ---- audit (issue 35.6: the read-only member reads no audit log)
  auditLogs: { args: [{ tenantId: '$tenant' }, { targetId: '$device' }, { actorEntityId: '$admin' }] },
  entityAuditLogs: { args: { entityId: '$device' } },
  // ---- auth
  session: { args: { id: '$session' }, answers: { scopedToken: "the token owner's own session (the target admin's): self-service, no grant involved" } },
  credentials: { args: { entityId: '$device' } },
  expiringCredentials: { args: { entityId: '$device' } },
  accessTokens: { args: { subjectId: '$admin' } },
  login: { args: { input: { identifier: '#alice', secret: '#alicePassword', tenantId: '$tenant' } } },
  createPassword: { args: { entityId: '$device', password: 'matrix-password-0123456789' } },
  createSharedKey: { args: { entityId: '$device', input: { description: 'matrix' } } },
  revokeCredential: { args: [{ credentialId: '$sharedKey' }, { credentialId: '$sharedKey', entityId: '$device' }] },
  createAccessToken: {
    args: [{ input: { name: 'matrix', permissions: [], subjectId: '$device', scoped: false } },
      { input: { name: 'matrix', permissions: [{ actions: ['read'], scopeMode: 'tenant', tenantId: '$tenant' }], subjectId: '$admin', scoped: true } }],
    answers: { otherAdmin: "its own token (subject = its own id): a ceiling only narrows the owner's live grants, so naming another tenant grants nothing there" },
  },
  replaceAccessTokenPermissions: { args: { credentialId: '$accessToken', permissions: [] } },
  revokeAccessToken: { args: { credentialId: '$accessToken' } },
  // ---- authz runtime (subject and object: every own/foreign combination)
  authzCheck: { args: { input: { subjectId: '$device', action: 'publish', resourceId: '$channel' } }, readOnly: true },
  authzBulkCheck: { args: { input: [{ subjectId: '$device', action: 'publish', resourceId: '$channel' }] }, readOnly: true },
  authzExplain: { args: { input: { subjectId: '$device', action: 'publish', resourceId: '$channel' } }, readOnly: true },
  explain: { args: { entityId: '$device', action: 'publish', resourceId: '$channel' } },
  // ---- custom endpoints
  apiEndpoints: { args: { tenantId: '$tenant' } },
  apiEndpoint: { args: { id: '$endpoint' } },
  apiEndpointExecutions: { args: { endpointId: '$endpoint' } },
  createApiEndpoint: {
    args: { input: { tenantId: '$tenant', key: 'matrix_new', name: 'matrix new', method: 'GET', path: '/api/custom/matrix-new', operationKind: 'query', graphql: 'query { health }' } },
  },
  updateApiEndpoint: { args: { id: '$endpoint', input: { name: 'renamed' } } },
  enableApiEndpoint: { args: { id: '$endpoint' } },
  disableApiEndpoint: { args: { id: '$endpoint' } },
  // ---- groups
  group: { args: { id: '$objectGroup' }, answers: READ },
  groups: { args: { tenantId: '$tenant' }, answers: READ },
  childGroups: { args: { parentId: '$parentGroup' }, answers: READ },
  objectGroups: { args: { tenantId: '$tenant' }, answers: READ },
  principalGroups: { args: { tenantId: '$tenant' }, answers: READ },
  groupMembers: { args: { groupId: '$principalGroup' }, answers: READ },
  entityGroups: { args: { entityId: '$device' }, answers: READ },
  createGroup: { args: { input: { tenantId: '$tenant', name: 'matrix-new' } } },
  createObjectGroup: { args: { input: { tenantId: '$tenant', name: 'matrix-new' } } },
  createPrincipalGroup: { args: { input: { tenantId: '$tenant', name: 'matrix-new' } } },
  updateGroup: { args: { id: '$objectGroup', input: { name: 'renamed' } } },
  setGroupParent: { args: { id: '$objectGroup', parentId: '$parentGroup' } },
  removeGroupParent: { args: { id: '$objectGroup' } },
  setObjectGroupParent: { args: { objectGroupId: '$objectGroup', parentGroupId: '$parentGroup' } },
  removeObjectGroupParent: { args: { objectGroupId: '$objectGroup' } },
  enableGroup: { args: { id: '$objectGroup' } },
  disableGroup: { args: { id: '$objectGroup' } },
  suspendGroup: { args: { id: '$objectGroup' } },
  deleteGroup: { args: { id: '$objectGroup' } },
  restoreGroup: { args: { id: '$objectGroup' } },
  purgeGroup: { args: { id: '$objectGroup' } },
  addEntityToObjectGroup: { args: { entityId: '$service', objectGroupId: '$objectGroup' } },
  removeEntityFromObjectGroup: { args: { entityId: '$device', objectGroupId: '$objectGroup' } },
  clearEntityObjectGroups: { args: { entityId: '$device' } },
  addGroupMember: { args: { groupId: '$principalGroup', entityId: '$device' } },
  removeGroupMember: { args: { groupId: '$principalGroup', entityId: '$service' } },
  // ---- identity
  entity: { args: { id: '$device' }, answers: READ },
  entities: { args: [{ tenantId: '$tenant' }, { profileId: '$profile' }, { parentGroupId: '$objectGroup' }], answers: READ },
  ownedEntities: { args: { ownerId: '$service' }, answers: READ },
  createEntity: { args: [{ input: { tenantId: '$tenant', kind: 'device', name: 'matrix-new' } }, { input: { tenantId: '$tenant', kind: 'device', name: 'matrix-new-2', profileId: '$profile' } }] },
  updateEntity: { args: [{ id: '$device', input: { name: 'renamed' } }, { id: '$device', input: { profileId: '$profile' } }] },
  enableEntity: { args: { id: '$device' } },
  disableEntity: { args: { id: '$device' } },
  deleteEntity: { args: { id: '$device' } },
  restoreEntity: { args: { id: '$device' } },
  purgeEntity: { args: { id: '$device' } },
  addOwnership: { args: { ownerId: '$service', ownedId: '$device' } },
  removeOwnership: { args: { ownerId: '$service', ownedId: '$device' } },
  // ---- certificate authority
  pkiAuthority: { args: { id: '$authority' }, answers: READ },
  pkiAuthorities: { args: { tenantId: '$tenant' }, answers: READ },
  certificate: { args: [{ credentialId: '$certificate' }, { serialNumber: '$certificateSerial', issuerId: '$authority' }] },
  certificates: { args: [{ tenantId: '$tenant' }, { entityId: '$device' }, { issuerId: '$authority' }] },
  certificateProfiles: { args: { tenantId: '$tenant' }, answers: READ },
  certificateProfile: { args: { id: '$certificateProfile' }, answers: READ },
  beginTenantAuthorityProvisioning: { args: { tenantId: '$tenant' } },
  provisionTenantAuthorityAutomatically: { args: { tenantId: '$tenant' } },
  beginAuthorityRetirement: { args: { authorityId: '$authority' } },
  completeAuthorityRetirement: { args: { authorityId: '$authority' } },
  revokeAuthority: { args: { authorityId: '$authority', reason: 'ca_compromise' } },
  transitionRetirement: { args: { authorityId: '$authority' } },
  setAuthorityDefaultProfile: { args: { authorityId: '$authority', profileId: '$certificateProfile' } },
  createCertificateProfile: { args: { input: { tenantId: '$tenant', name: 'matrix-new' } } },
  updateCertificateProfile: { args: { id: '$certificateProfile', input: { description: 'changed' } } },
  deleteCertificateProfile: { args: { id: '$certificateProfile' } },
  issueCertificateFromCsrV2: { args: { input: { entityId: '$device', csrPem: '#csr', idempotencyKey: 'matrix-issue' } } },
  issueGeneratedCertificateV2: { args: { input: { entityId: '$device', idempotencyKey: 'matrix-generated' } } },
  renewCertificateFromCsrV2: { args: { input: { credentialId: '$certificate', csrPem: '#csr', idempotencyKey: 'matrix-renew' } } },
  renewGeneratedCertificateV2: { args: { input: { credentialId: '$certificate', idempotencyKey: 'matrix-renew-generated' } } },
  revokeCertificateV2: {
    args: [{ input: { credentialId: '$certificate' } }, { input: { fingerprintSha256: '$certificateFingerprint' } },
      { input: { issuerId: '$authority', serialNumber: '$certificateSerial' } }],
  },
  revokeEntityCertificates: { args: { entityId: '$device' } },
  bulkRevokeCertificates: { args: [{ input: { tenantId: '$tenant' } }, { input: { issuerId: '$authority' } }, { input: { principalGroupId: '$principalGroup' } }] },
  // ---- policies
  permissionBlocks: { args: { tenantId: '$tenant' }, answers: READ },
  permissionBlock: { args: { id: '$block' }, answers: READ },
  directPolicies: { args: [{ tenantId: '$tenant' }, { subjectId: '$device' }, { permissionBlockId: '$readBlock' }, { objectId: '$channel' }], answers: READ },
  actions: { args: { tenantId: '$tenant', limit: 50, offset: 0 } },
  action: { args: { id: '#readAction' } },
  actionApplicability: { args: { tenantId: '$tenant', limit: 50, offset: 0 } },
  actionAssignmentRules: { args: { tenantId: '$tenant', limit: 50, offset: 0 }, answers: READ },
  createPermissionBlock: {
    args: [{ input: { tenantId: '$tenant', scopeMode: 'tenant', actionIds: ['read'] } },
      { input: { tenantId: '$tenant', scopeMode: 'object', objectKind: 'resource', objectId: '$channel', actionIds: ['read'] } },
      { input: { tenantId: '$tenant', scopeMode: 'group_direct_objects', objectKind: 'entity', groupId: '$objectGroup', actionIds: ['read'] } }],
  },
  deletePermissionBlock: { args: { id: '$block' } },
  createDirectPolicy: { args: { input: { tenantId: '$tenant', subjectKind: 'entity', subjectId: '$device', permissionBlockId: '$readBlock' } } },
  deleteDirectPolicy: { args: { id: '$directPolicy' } },
  updateAction: { args: { id: '#readAction', input: { description: 'changed' } } },
  deleteAction: { args: { id: '#readAction' } },
  addActionApplicability: { args: { input: { actionId: '#readAction', objectKind: 'signing_key' } } },
  removeActionApplicability: { args: { input: { actionId: '#readAction', objectKind: 'resource' } } },
  createActionAssignmentRule: { args: { input: { tenantId: '$tenant', entityKind: 'device', actionName: 'read', objectKind: 'resource', decision: 'deny' } } },
  deleteActionAssignmentRule: { args: { id: '$rule' } },
  // ---- profiles
  profiles: { args: { tenantId: '$tenant' }, answers: READ },
  profile: { args: { id: '$profile' }, answers: READ },
  profileVersions: { args: { profileId: '$profile' }, answers: READ },
  createProfile: { args: { input: { tenantId: '$tenant', objectKind: 'entity', kind: 'device', key: 'matrix-new', displayName: 'matrix' } } },
  createProfileVersion: { args: { profileId: '$profile', input: { version: 2 } } },
  updateProfile: { args: { id: '$profile', input: { displayName: 'changed' } } },
  updateProfileVersion: { args: { id: '$profileVersion', input: { status: 'active' } } },
  // ---- resources
  resource: { args: { id: '$channel' }, answers: READ },
  resources: { args: [{ tenantId: '$tenant' }, { parentGroupId: '$objectGroup' }], answers: READ },
  resourceKinds: { args: { tenantId: '$tenant' }, answers: READ },
  createResource: { args: [{ input: { tenantId: '$tenant', kind: 'channel', name: 'matrix-new' } }, { input: { tenantId: '$tenant', kind: 'channel', name: 'matrix-new-2', ownerId: '$device' } }] },
  updateResource: { args: { id: '$channel', input: { name: 'renamed' } } },
  deleteResource: { args: { id: '$channel' } },
  restoreResource: { args: { id: '$channel' } },
  purgeResource: { args: { id: '$channel' } },
  addResourceToObjectGroup: { args: { resourceId: '$ceilingChannel', objectGroupId: '$objectGroup' } },
  removeResourceFromObjectGroup: { args: { resourceId: '$channel', objectGroupId: '$objectGroup' } },
  clearResourceObjectGroups: { args: { resourceId: '$channel' } },
  // ---- roles
  roles: { args: { tenantId: '$tenant' }, answers: READ },
  role: { args: { id: '$role' }, answers: READ },
  roleAssignments: { args: [{ tenantId: '$tenant' }, { subjectId: '$device' }, { roleId: '$role' }], answers: READ },
  createRole: { args: { input: { tenantId: '$tenant', name: 'matrix-new' } } },
  updateRole: { args: { id: '$role', input: { name: 'renamed' } } },
  replaceRolePermissionBlocks: { args: { roleId: '$role', permissionBlockIds: ['$readBlock'] } },
  deleteRole: { args: { id: '$role' } },
  restoreRole: { args: { id: '$role' } },
  purgeRole: { args: { id: '$role' } },
  createRoleAssignment: { args: { input: { tenantId: '$tenant', subjectKind: 'entity', subjectId: '$device', roleId: '$role' } } },
  deleteRoleAssignment: { args: { id: '$assignment' } },
  // ---- tenants
  tenant: { args: { id: '$tenant' }, answers: READ },
  tenantMembers: { args: { tenantId: '$tenant' }, answers: READ },
  tenantAssignableEntities: { args: { tenantId: '$tenant', q: 'device' } },
  myTenantRoles: { args: { tenantId: '$tenant' }, answers: own('the caller\'s own roles in the tenant') },
  tenantInvitations: { args: { tenantId: '$tenant' } },
  updateTenant: { args: { id: '$tenant', input: { name: 'renamed' } } },
  enableTenant: { args: { id: '$tenant' } },
  disableTenant: { args: { id: '$tenant' } },
  freezeTenant: { args: { id: '$tenant' } },
  deleteTenant: { args: { id: '$tenant' } },
  restoreTenant: { args: { id: '$tenant' } },
  purgeTenant: { args: { id: '$tenant' } },
  addTenantMember: { args: { tenantId: '$tenant', entityId: '$service', roleId: '$adminRole' } },
  removeTenantMember: { args: { tenantId: '$tenant', entityId: '$member' } },
  createTenantInvitation: { args: { tenantId: '$tenant', input: { inviteeEmail: 'matrix@example.com', roleId: '$adminRole' } } },
  acceptTenantInvitation: { args: { tenantId: '$tenant' } },
  rejectTenantInvitation: { args: { tenantId: '$tenant' } },
  revokeTenantInvitation: { args: { tenantId: '$tenant', invitationId: '$invitation' } },
};

/** Operations that take no object or tenant id at all (the caller's own session, the platform, public). */
export const NO_IDS: Record<string, string> = {
  whoami: "the caller's own identity",
  signingKeys: 'platform signing keys',
  signup: 'public self-registration',
  logout: "the caller's own session",
  refreshSession: "the caller's own session",
  changeOwnPassword: "the caller's own password",
  rotateSigningKeys: 'platform signing keys',
  health: 'liveness',
  systemStatus: 'platform status',
  tenants: 'lists what the caller may read (no id to aim at another tenant)',
  myTenantInvitations: "the caller's own invitations",
  acceptTenantInvitationToken: 'an emailed token (no id)',
  createTenant: 'a new tenant',
  createAction: 'platform action catalog',
  orphanPolicies: 'platform-wide report',
};
