-- A client certificate the service has no record of is placed by its issuer: the authority whose subject
-- key identifier its AKI names, or whose subject its issuer name is (src/pki/client-certificates.ts). Both
-- lookups must stay O(1) in the number of tenant authorities, so they get indexes.
create index pki_authorities__subject_key_id on pki_authorities (subject_key_id) where subject_key_id is not null;
create index pki_authorities__subject on pki_authorities (subject);
