-- Revoking an authority (a compromise, distinct from retirement): when, why and by whom. Its certificate's
-- ledger entry is written under its parent (the platform intermediate), whose CRL and OCSP publish it; a
-- revoked authority issues nothing, and the client-certificate verifier refuses what it signed.
alter table pki_authorities
  add column revoked_at timestamptz,
  add column revocation_reason text constraint pki_authorities__revocation_reason check (revocation_reason in (
    'unspecified', 'key_compromise', 'ca_compromise', 'affiliation_changed', 'superseded', 'cessation_of_operation', 'privilege_withdrawn')),
  add column revoked_by uuid,
  add constraint pki_authorities__revoked_issues_nothing check (revoked_at is null or not issuance_enabled);
-- OCSP of the platform intermediate asks for one of its (up to tens of thousands of) children by serial.
create index pki_authorities__parent_serial on pki_authorities (parent_id, serial_number) where serial_number is not null;
