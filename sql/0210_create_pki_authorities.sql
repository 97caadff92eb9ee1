-- The managed certificate authority: certificate profiles (what a leaf may be) and the authorities
-- (root, platform intermediate, platform leaf issuer, tenant intermediates), each keeping its versions.

create table certificate_profiles (
  id uuid primary key default gen_random_uuid(),
  -- null: a platform profile, usable by every issuer
  tenant_id uuid references tenants (id) on delete cascade,
  name text not null constraint certificate_profiles__name_format check (name ~ '^[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}$'),
  description text,
  key_algorithms text[] not null constraint certificate_profiles__key_algorithms check (
    cardinality(key_algorithms) >= 1
    and key_algorithms <@ array['ecdsa-p256', 'ecdsa-p384', 'rsa-2048', 'rsa-3072', 'rsa-4096', 'ed25519']),
  min_ttl_secs int not null,
  default_ttl_secs int not null,
  max_ttl_secs int not null,
  -- every leaf is a client certificate; profiles may add more purposes
  extended_key_usages text[] not null default '{client_auth}' constraint certificate_profiles__extended_key_usages check (
    'client_auth' = any (extended_key_usages)
    and extended_key_usages <@ array['client_auth', 'server_auth', 'code_signing', 'email_protection', 'time_stamping']),
  allow_dns_names boolean not null default false,
  allow_ip_addresses boolean not null default false,
  -- when not empty, every DNS name must equal one of these or end with '.' + one of them
  dns_suffixes text[] not null default '{}',
  max_san_names int not null default 10 constraint certificate_profiles__max_san_names check (max_san_names between 0 and 100),
  -- a leaf is due for renewal this long before its notAfter
  renewal_window_secs int not null constraint certificate_profiles__renewal_window check (renewal_window_secs >= 0),
  is_system boolean not null default false,
  created_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  constraint certificate_profiles__ttl_order check (
    min_ttl_secs >= 60 and min_ttl_secs <= default_ttl_secs and default_ttl_secs <= max_ttl_secs)
);
create unique index certificate_profiles__tenant_name on certificate_profiles (tenant_id, lower(name)) nulls not distinct;

-- The platform default profile: every issuer starts with it.
insert into certificate_profiles (id, tenant_id, name, description, key_algorithms, min_ttl_secs, default_ttl_secs, max_ttl_secs,
  extended_key_usages, renewal_window_secs, is_system)
values ('00000000-0000-0000-0000-0000000000c1', null, 'default', 'Client certificates of any supported key type, 30 days by default, at most a year',
  array['ecdsa-p256', 'ecdsa-p384', 'rsa-2048', 'rsa-3072', 'rsa-4096', 'ed25519'], 300, 2592000, 31536000, '{client_auth}', 604800, true);

create table pki_authorities (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid references tenants (id) on delete cascade,
  parent_id uuid references pki_authorities (id),
  kind text not null constraint pki_authorities__kind check (
    kind in ('root', 'platform_intermediate', 'platform_leaf_issuer', 'tenant_intermediate')),
  version int not null constraint pki_authorities__version_positive check (version >= 1),
  status text not null constraint pki_authorities__status check (status in ('pending', 'active', 'retiring', 'retired', 'failed')),
  issuance_enabled boolean not null default false,
  -- RFC 4514 text of the certificate subject (or of the intended one while provisioning)
  subject text not null,
  serial_number text,
  fingerprint_sha256 text,
  subject_key_id text,
  authority_key_id text,
  certificate_der bytea,
  csr_pem text,
  key_backend text constraint pki_authorities__key_backend check (key_backend in ('encrypted_database', 'pkcs11')),
  -- StoredKeyRef (src/pki/keys/types.ts): a wrapped key or a token reference, never a key in the clear
  key_ref jsonb,
  key_algorithm text,
  provisioning_mode text not null constraint pki_authorities__provisioning_mode check (provisioning_mode in ('config', 'automatic', 'manual')),
  failure_reason text,
  default_profile_id uuid references certificate_profiles (id),
  ocsp_url text,
  ca_issuers_url text,
  crl_distribution_point_url text,
  not_before timestamptz,
  not_after timestamptz,
  created_by uuid,
  created_at timestamptz not null default now(),
  activated_at timestamptz,
  retiring_at timestamptz,
  retired_at timestamptz,
  updated_at timestamptz,
  constraint pki_authorities__tenant_kind check ((kind = 'tenant_intermediate') = (tenant_id is not null)),
  constraint pki_authorities__root_has_no_key check (kind <> 'root' or key_ref is null),
  constraint pki_authorities__key_pair check ((key_backend is null) = (key_ref is null)),
  constraint pki_authorities__certificate_present check (status = 'failed' or certificate_der is not null),
  constraint pki_authorities__issuers_have_keys check (kind = 'root' or status = 'failed' or key_ref is not null),
  constraint pki_authorities__issuance_when_active check (not issuance_enabled or status = 'active')
);
create unique index pki_authorities__fingerprint on pki_authorities (fingerprint_sha256) where fingerprint_sha256 is not null;
create unique index pki_authorities__one_active_tenant on pki_authorities (tenant_id) where kind = 'tenant_intermediate' and status = 'active';
create unique index pki_authorities__one_active_platform on pki_authorities (kind) where kind <> 'tenant_intermediate' and status = 'active';
create unique index pki_authorities__kind_version on pki_authorities (kind, tenant_id, version) nulls not distinct;
create index pki_authorities__parent on pki_authorities (parent_id);

-- SPEC.md: the key backend is stored per authority and never changed after provisioning.
create function pki_authorities__key_immutable() returns trigger language plpgsql as $$
begin
  if old.key_ref is not null and (new.key_ref is distinct from old.key_ref or new.key_backend is distinct from old.key_backend) then
    raise exception 'the key of an authority cannot be changed' using errcode = '23514', constraint = 'pki_authorities__key_immutable';
  end if;
  return new;
end $$;
create trigger pki_authorities__key_immutable before update of key_ref, key_backend on pki_authorities
  for each row execute function pki_authorities__key_immutable();
