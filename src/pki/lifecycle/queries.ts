// SQL of the lifecycle sweeper: certificates and authorities entering their warning window that have no
// notice yet, and the notice rows with their outbox records written in one statement each.
import type { Queryable } from '../../db/client.js';

/** One sweeper across instances: the transaction that holds this lock sweeps; the others skip the tick. */
const SWEEPER_LOCK = 'pki:lifecycle-sweeper';

export async function trySweeperLock(tx: Queryable): Promise<boolean> {
  const [row] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(hashtextextended(${SWEEPER_LOCK}, 0)) as ok`;
  return row?.ok === true;
}

/**
 * Authorities (root included) expiring within `warnSecs`, still in use, without a notice: each gets its
 * notice row and its certificate.authority_expiring outbox record. Returns how many were written.
 */
export async function noticeExpiringAuthorities(tx: Queryable, warnSecs: number, limit: number): Promise<number> {
  const rows = await tx<{ id: string }[]>`
    with due as (
      select a.id, a.kind, a.tenant_id, a.subject, a.serial_number, a.fingerprint_sha256, a.not_after, a.status
      from pki_authorities a
      where a.status in ('active', 'retiring') and a.not_after is not null
        and a.not_after > now() and a.not_after <= now() + make_interval(secs => ${warnSecs})
        and not exists (select 1 from certificate_lifecycle_notices n where n.subject_id = a.id and n.event = 'certificate.authority_expiring')
      order by a.not_after, a.id
      limit ${limit}
    ), noticed as (
      insert into certificate_lifecycle_notices (subject_id, event, not_after)
      select id, 'certificate.authority_expiring', not_after from due
      on conflict do nothing
      returning subject_id
    )
    insert into event_outbox (event, tenant_id, payload)
    select 'certificate.authority_expiring', d.tenant_id, jsonb_build_object(
      'authority_id', d.id, 'kind', d.kind, 'tenant_id', d.tenant_id, 'subject', d.subject, 'serial_number', d.serial_number,
      'fingerprint_sha256', d.fingerprint_sha256, 'status', d.status, 'not_after', d.not_after,
      'expires_in_secs', floor(extract(epoch from d.not_after - now()))::bigint)
    from due d join noticed n on n.subject_id = d.id
    returning id`;
  return rows.length;
}

/**
 * Active leaf certificates expiring within `warnSecs` without a notice and not already renewed (their
 * replacement exists): each gets its notice row and its certificate.expiring outbox record.
 */
export async function noticeExpiringCertificates(tx: Queryable, warnSecs: number, limit: number): Promise<number> {
  if (limit <= 0) return 0;
  const rows = await tx<{ id: string }[]>`
    with due as (
      select c.id, c.entity_id, e.tenant_id, c.issuer_id, c.identifier, c.expires_at, c.metadata ->> 'fingerprint_sha256' as fingerprint,
        c.metadata ->> 'profile_id' as profile_id
      from credentials c join entities e on e.id = c.entity_id
      where c.kind = 'certificate' and c.status = 'active' and c.expires_at is not null
        and c.expires_at > now() and c.expires_at <= now() + make_interval(secs => ${warnSecs})
        and not exists (select 1 from certificate_lifecycle_notices n where n.subject_id = c.id and n.event = 'certificate.expiring')
        and not exists (select 1 from certificate_renewals r where r.previous_credential_id = c.id)
      order by c.expires_at, c.id
      limit ${limit}
    ), noticed as (
      insert into certificate_lifecycle_notices (subject_id, event, not_after)
      select id, 'certificate.expiring', expires_at from due
      on conflict do nothing
      returning subject_id
    )
    insert into event_outbox (event, tenant_id, payload)
    select 'certificate.expiring', d.tenant_id, jsonb_build_object(
      'credential_id', d.id, 'entity_id', d.entity_id, 'tenant_id', d.tenant_id, 'issuer_id', d.issuer_id, 'serial_number', d.identifier,
      'fingerprint_sha256', d.fingerprint, 'profile_id', d.profile_id, 'not_after', d.expires_at,
      'expires_in_secs', floor(extract(epoch from d.expires_at - now()))::bigint)
    from due d join noticed n on n.subject_id = d.id
    returning id`;
  return rows.length;
}
