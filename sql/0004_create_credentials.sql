-- Credentials (password, access token, certificate, shared key), access-token ceilings, sessions and
-- the JWT signing keys.

create table credentials (
  id uuid primary key default gen_random_uuid(),
  entity_id uuid not null references entities (id) on delete cascade,
  kind text not null constraint credentials__kind check (kind in ('password', 'access_token', 'certificate', 'shared_key')),
  -- certificates: lowercase-hex serial; others: free label or null
  identifier text,
  -- scrypt string for passwords, keyed hash for tokens and shared keys, null for certificates
  secret_hash text,
  -- certificates: the signing authority (never null for certificates)
  issuer_id uuid,
  status text not null default 'active' constraint credentials__status check (status in ('active', 'revoked')),
  scoped boolean not null default false,
  name text,
  description text,
  metadata jsonb not null default '{}'::jsonb,
  expires_at timestamptz,
  last_used_at timestamptz,
  created_by uuid,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  revoked_by uuid,
  revocation_reason text,
  constraint credentials__certificate_has_issuer check (kind <> 'certificate' or (issuer_id is not null and identifier is not null)),
  constraint credentials__scoped_tokens_only check (not scoped or kind = 'access_token'),
  constraint credentials__revoked_stamp check ((status = 'revoked') = (revoked_at is not null))
);
create index credentials__entity_kind on credentials (entity_id, kind, status);
create unique index credentials__issuer_serial on credentials (issuer_id, identifier) where kind = 'certificate';
create unique index credentials__fingerprint on credentials ((metadata ->> 'fingerprint_sha256'))
  where kind = 'certificate' and metadata ? 'fingerprint_sha256';
-- device keys are found by their keyed hash: the key is the only thing a device presents
create unique index credentials__shared_key_hash on credentials (secret_hash) where kind = 'shared_key';
create index credentials__expires_at on credentials (expires_at) where status = 'active' and expires_at is not null;

-- Shared keys belong to devices and other non-human principals.
create function credentials__shared_key_not_human() returns trigger language plpgsql as $$
begin
  if new.kind = 'shared_key' and exists (select 1 from entities e where e.id = new.entity_id and e.kind = 'human') then
    raise exception 'shared keys are for non-human entities' using errcode = '23514', constraint = 'credentials__shared_key_not_human';
  end if;
  return new;
end $$;
create trigger credentials__shared_key_not_human before insert or update of kind, entity_id on credentials
  for each row execute function credentials__shared_key_not_human();

-- The ceiling of a scoped access token: same action and scope vocabulary as permission blocks.
create table credential_permission_limits (
  id uuid primary key default gen_random_uuid(),
  credential_id uuid not null references credentials (id) on delete cascade,
  actions text[] not null constraint credential_permission_limits__actions check (cardinality(actions) >= 1),
  scope_mode text not null constraint credential_permission_limits__scope_mode check (
    scope_mode in ('platform', 'tenant', 'object_kind', 'object_type', 'object')),
  tenant_id uuid,
  object_kind object_kind,
  object_type object_type,
  object_id uuid,
  conditions jsonb not null default '{}'::jsonb constraint credential_permission_limits__conditions_object check (jsonb_typeof(conditions) = 'object'),
  position int not null default 0,
  created_at timestamptz not null default now()
);
create index credential_permission_limits__credential on credential_permission_limits (credential_id, position);

create table sessions (
  id uuid primary key default gen_random_uuid(),
  entity_id uuid not null references entities (id) on delete cascade,
  -- tenant context chosen at login
  tenant_id uuid references tenants (id) on delete cascade,
  credential_kind text not null default 'password',
  ip text,
  user_agent text,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  revoked_reason text
);
create index sessions__entity on sessions (entity_id) where revoked_at is null;
create index sessions__tenant on sessions (tenant_id) where revoked_at is null and tenant_id is not null;
create index sessions__expires_at on sessions (expires_at);

create table signing_keys (
  kid text primary key,
  algorithm text not null default 'ES256' constraint signing_keys__algorithm check (algorithm = 'ES256'),
  status text not null constraint signing_keys__status check (status in ('primary', 'standby', 'retired')),
  public_jwk jsonb not null,
  -- AES-256-GCM under SVC_KEY_ENCRYPTION_KEY when storage_mode = 'encrypted'
  private_key bytea not null,
  storage_mode text not null constraint signing_keys__storage_mode check (storage_mode in ('encrypted', 'plaintext')),
  key_encryption_key_id text,
  created_at timestamptz not null default now(),
  retired_at timestamptz,
  -- a retired key verifies until the last token it signed has expired
  verify_until timestamptz
);
create unique index signing_keys__one_primary on signing_keys (status) where status = 'primary';
