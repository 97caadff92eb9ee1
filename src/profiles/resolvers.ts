// GraphQL for profiles (device types) and their versions.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { ProfileRow, VersionRow } from './queries.js';
import type { ProfilesService } from './service.js';

const toProfile = (r: ProfileRow) => ({
  id: r.id, tenantId: r.tenant_id, objectKind: r.object_kind, kind: r.kind, key: r.key, displayName: r.display_name,
  description: r.description, status: r.status, createdAt: iso(r.created_at), updatedAt: iso(r.updated_at),
});

const toVersion = (r: VersionRow) => ({
  id: r.id, profileId: r.profile_id, version: r.version, jsonSchema: r.json_schema, uiSchema: r.ui_schema,
  status: r.status, createdAt: iso(r.created_at), updatedAt: iso(r.updated_at),
});

export function profilesGraphqlModule(service: ProfilesService): GraphqlModule {
  return {
    name: 'profiles',
    sdl: readSdl('profiles'),
    resolvers: {
      Query: {
        profiles: authed(async (p, a) => {
          const page = await service.list(p, a);
          return { total: page.total, items: page.items.map(toProfile) };
        }),
        profile: authed(async (p, a) => toProfile(await service.get(p, a.id))),
        profileVersions: authed(async (p, a) => (await service.versions(p, a.profileId)).map(toVersion)),
      },
      Mutation: {
        createProfile: authed(async (p, a) => toProfile(await service.create(p, a.input as Args))),
        createProfileVersion: authed(async (p, a) => toVersion(await service.createVersion(p, a.profileId, a.input as Args))),
        updateProfile: authed(async (p, a) => toProfile(await service.update(p, a.id, a.input as Args))),
        updateProfileVersion: authed(async (p, a) => toVersion(await service.updateVersion(p, a.id, a.input as Args))),
      },
    },
  };
}
