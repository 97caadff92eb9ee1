-- The CRL each issuer last published: its number (monotonic per issuer, RFC 5280 5.2.3), validity, the
-- ledger position it covers and its signature. The CRL itself is not stored: its TBS is the envelope of
-- these fields around the ledger's stored entries up to that position, so any instance rebuilds the same
-- DER by concatenation and this signature stays valid for it; a restart does not reuse a number.
-- No foreign key, like the ledger: the numbering must survive an authority's purge.
create table certificate_crl_state (
  issuer_id uuid primary key,
  crl_number bigint not null constraint certificate_crl_state__crl_number check (crl_number > 0),
  this_update timestamptz not null,
  next_update timestamptz not null,
  -- the highest certificate_revocations.id of the issuer included (0: none yet)
  ledger_mark bigint not null,
  entry_count integer not null,
  -- over the TBSCertList, as X.509 carries it (DER ECDSA-Sig-Value, PKCS#1 v1.5, Ed25519)
  signature bytea not null,
  updated_at timestamptz not null default now()
);
