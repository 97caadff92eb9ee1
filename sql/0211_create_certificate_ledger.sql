-- Certificate issuance bookkeeping: the append-only revocation ledger (with each entry's CRL DER),
-- renewal links, idempotency records, and the transactional outbox of lifecycle events.

-- No foreign keys on purpose: the ledger survives the purge of the entity, tenant or authority it names.
create table certificate_revocations (
  id bigint generated always as identity primary key,
  issuer_id uuid not null,
  -- lowercase hex, as credentials.identifier
  serial_number text not null,
  credential_id uuid,
  entity_id uuid,
  tenant_id uuid,
  fingerprint_sha256 text,
  reason text not null constraint certificate_revocations__reason check (reason in (
    'unspecified', 'key_compromise', 'ca_compromise', 'affiliation_changed', 'superseded', 'cessation_of_operation', 'privilege_withdrawn')),
  -- whole seconds: the time the CRL entry states
  revoked_at timestamptz not null,
  -- the certificate's notAfter: a CRL may leave the entry out once it has passed (RFC 5280 3.3)
  not_after timestamptz,
  actor_entity_id uuid,
  -- DER of this entry of a CRL's revokedCertificates (serial, revocationDate, reasonCode): a CRL is these
  -- entries concatenated plus one signature
  crl_entry bytea not null,
  created_at timestamptz not null default now()
);
create unique index certificate_revocations__issuer_serial on certificate_revocations (issuer_id, serial_number);
create index certificate_revocations__issuer on certificate_revocations (issuer_id, id);
create index certificate_revocations__credential on certificate_revocations (credential_id);

create function certificate_revocations__append_only() returns trigger language plpgsql as $$
begin
  raise exception 'the certificate revocation ledger is append-only' using errcode = '55000';
end $$;
create trigger certificate_revocations__no_update before update or delete on certificate_revocations
  for each row execute function certificate_revocations__append_only();
create trigger certificate_revocations__no_truncate before truncate on certificate_revocations
  for each statement execute function certificate_revocations__append_only();

-- A certificate credential is revoked only together with its ledger entry (checked at commit), so no
-- path can take a certificate out of service without it reaching CRLs and OCSP.
create function credentials__certificate_revocation_in_ledger() returns trigger language plpgsql as $$
begin
  if new.kind = 'certificate' and new.status = 'revoked' and not exists (
    select 1 from certificate_revocations r where r.issuer_id = new.issuer_id and r.serial_number = new.identifier) then
    raise exception 'certificate % was revoked without a revocation ledger entry', new.id
      using errcode = '23514', constraint = 'credentials__certificate_revocation_in_ledger';
  end if;
  return null;
end $$;
create constraint trigger credentials__certificate_revocation_in_ledger after update of status on credentials
  deferrable initially deferred for each row when (new.kind = 'certificate' and new.status = 'revoked' and old.status <> 'revoked')
  execute function credentials__certificate_revocation_in_ledger();

-- Which certificate replaced which: a certificate is renewed at most once.
create table certificate_renewals (
  previous_credential_id uuid primary key references credentials (id) on delete cascade,
  replacement_credential_id uuid not null references credentials (id) on delete cascade,
  created_at timestamptz not null default now()
);
create unique index certificate_renewals__replacement on certificate_renewals (replacement_credential_id);

-- Idempotency of issuance and renewal: the same key for the same subject returns the same certificate.
create table certificate_issuance_requests (
  -- the entity (issuance) or the renewed credential (renewal)
  scope_id uuid not null,
  operation text not null constraint certificate_issuance_requests__operation check (
    operation in ('issue_csr', 'issue_generated', 'renew_csr', 'renew_generated')),
  idempotency_key text not null,
  -- what was asked (CSR, TTL, options): the same key with another request is a conflict
  request_hash text not null,
  credential_id uuid not null references credentials (id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (scope_id, operation, idempotency_key)
);
create index certificate_issuance_requests__credential on certificate_issuance_requests (credential_id);

-- Lifecycle events written in the transaction of the change; a relay delivers them afterwards.
create table event_outbox (
  id uuid primary key default gen_random_uuid(),
  event text not null,
  tenant_id uuid,
  payload jsonb not null constraint event_outbox__payload_object check (jsonb_typeof(payload) = 'object'),
  created_at timestamptz not null default now()
);
create index event_outbox__created on event_outbox (created_at, id);

-- Certificate listings by issuer and the lookup by fingerprint.
create index credentials__certificate_issuer on credentials (issuer_id, created_at) where kind = 'certificate';
