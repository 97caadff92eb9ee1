-- Global guardrail rules (SPEC.md "Authentication" 12, INTERFACES.md section 6). With default deny, these
-- allows are what makes ordinary grants possible; the absolute denies can never be overridden.

-- Devices never receive write, delete or manage on resources, whatever any other rule says.
insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, object_type, decision, is_absolute)
values
  (null, 'device', 'delete', 'resource', null, 'deny', true),
  (null, 'device', 'write', 'resource', null, 'deny', true),
  (null, 'device', 'manage', 'resource', null, 'deny', true);

-- Humans: everything the seeded applicability allows (administrators are people).
insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, object_type, decision)
select null, 'human', a.name, ap.object_kind, ap.object_type, 'allow'
from action_applicability ap join actions a on a.id = ap.action_id;

-- Services (automation acting for a tenant or the platform): everything except the platform-only
-- operations on signing keys and automated authority provisioning.
insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, object_type, decision)
select null, 'service', a.name, ap.object_kind, ap.object_type, 'allow'
from action_applicability ap join actions a on a.id = ap.action_id
where ap.object_kind <> 'signing_key' and a.name <> 'pki.provision_automated';

-- Devices: publish and subscribe on channels, read resources.
insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, object_type, decision)
values
  (null, 'device', 'publish', 'resource', 'resource:channel', 'allow'),
  (null, 'device', 'subscribe', 'resource', 'resource:channel', 'allow'),
  (null, 'device', 'read', 'resource', null, 'allow');

-- Workloads and applications: the runtime side of automation (read, message, execute, ask the engine).
insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, object_type, decision)
select null, k.kind, p.action, p.object_kind, p.object_type, 'allow'
from (values ('workload'), ('application')) as k(kind)
cross join (values
  ('read', 'entity', null), ('read', 'resource', null), ('read', 'group', null),
  ('publish', 'resource', 'resource:channel'), ('subscribe', 'resource', 'resource:channel'),
  ('execute', 'resource', 'resource:rule'), ('execute', 'resource', 'resource:report'),
  ('read', 'api_endpoint', null), ('execute', 'api_endpoint', null),
  ('authz.check', 'tenant', null)
) as p(action, object_kind, object_type);
