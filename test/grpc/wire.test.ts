// The gRPC wire contract: the repository's proto against a table written from INTERFACES.md section 4
// (package atom.v1, every service, method path, field name, number and type, CertificateService included).
// Checked twice: in the loaded descriptors, and in the bytes grpc-js puts on the wire for a message with
// every field set, read back by field number. A renamed package or a renumbered field fails it.
import * as protoLoader from '@grpc/proto-loader';
import t from 'tap';
import { loadDefinition, SERVICE_NAMES } from '../../src/grpc/server.js';

type FieldType = 'string' | 'bytes' | 'bool' | 'uint64' | 'map<string,string>';
type Fields = Record<string, [number, FieldType]>;

const s = (n: number): [number, FieldType] => [n, 'string'];

/** INTERFACES.md section 4, transcribed: method -> request fields, response fields. */
const CONTRACT: Record<string, { req: Fields; res: Fields }> = {
  'AuthzService/Check': {
    req: { subject_id: s(1), action: s(2), resource_id: s(3), context: [4, 'map<string,string>'], object_kind: s(5), object_id: s(6) },
    res: { allowed: [1, 'bool'], reason: s(2) },
  },
  'AuthService/Authenticate': {
    req: { token: s(1) },
    res: { entity_id: s(1), tenant_id: s(2), session_id: s(3) },
  },
  'AuthService/AuthenticateCredential': {
    req: { identifier: s(1), secret: s(2), kind: s(3), tenant_id: s(4), tenant_alias: s(5) },
    res: { entity_id: s(1), tenant_id: s(2), credential_id: s(3) },
  },
  'CertificateService/ResolveCertificateV2': {
    req: { certificate_der: [1, 'bytes'], fingerprint_sha256: s(2), issuer_fingerprint_sha256: s(3), serial_number: s(4), expected_tenant_id: s(5) },
    res: { entity_id: s(1), tenant_id: s(2), credential_id: s(3), issuer_id: s(4), expires_at: s(5), status: s(6) },
  },
  'CertificateService/RevokeEntityCertificates': {
    req: { entity_id: s(1), reason: s(2) },
    res: { revoked: [1, 'uint64'] },
  },
  'AliasService/ResolveAlias': {
    req: { tenant_id: s(1), tenant_alias: s(2), object_kind: s(3), object_alias: s(4), global: [5, 'bool'] },
    res: { tenant_id: s(1), object_id: s(2) },
  },
};

const PACKAGE = 'atom.v1';
const definition = loadDefinition();

interface DescriptorField { name: string; number: number; label: string; type: string; typeName: string }
interface Descriptor { field: DescriptorField[]; nestedType: (Descriptor & { name: string; options: { mapEntry?: boolean } | null })[] }

function typeOf(f: DescriptorField, d: Descriptor): string {
  if (f.type === 'TYPE_MESSAGE') {
    const entry = d.nestedType.find((n) => n.name === f.typeName);
    if (f.label === 'LABEL_REPEATED' && entry?.options?.mapEntry) {
      const [k, v] = entry.field;
      return `map<${k?.type.replace('TYPE_', '').toLowerCase()},${v?.type.replace('TYPE_', '').toLowerCase()}>`;
    }
    return `message ${f.typeName}`;
  }
  return `${f.label === 'LABEL_REPEATED' ? 'repeated ' : ''}${f.type.replace('TYPE_', '').toLowerCase()}`;
}

function fieldsOf(type: { type: unknown }): Record<string, [number, string]> {
  const d = type.type as unknown as Descriptor;
  return Object.fromEntries(d.field.map((f) => [f.name, [f.number, typeOf(f, d)]]));
}

t.test('services and methods: exactly the contract, at /atom.v1.<Service>/<Method>', async (t) => {
  const services = Object.keys(definition).filter((k) => !('format' in (definition[k] as object)));
  t.same(services.sort(), SERVICE_NAMES.map((n) => `${PACKAGE}.${n}`).sort(), 'the four services of package atom.v1, no other');
  const methods: string[] = [];
  for (const name of SERVICE_NAMES) {
    const service = definition[`${PACKAGE}.${name}`] as protoLoader.ServiceDefinition;
    for (const [method, m] of Object.entries(service)) {
      methods.push(`${name}/${method}`);
      t.equal(m.path, `/${PACKAGE}.${name}/${method}`, `${name}.${method} path`);
      t.notOk(m.requestStream || m.responseStream, `${name}.${method} is unary`);
    }
  }
  t.same(methods.sort(), Object.keys(CONTRACT).sort(), 'every method of the contract and no other');
});

t.test('field names, numbers and types', async (t) => {
  for (const [path, want] of Object.entries(CONTRACT)) {
    const [service, method] = path.split('/') as [string, string];
    const m = (definition[`${PACKAGE}.${service}`] as protoLoader.ServiceDefinition)[method];
    if (!m) {
      t.fail(`${path} missing`);
      continue;
    }
    t.same(fieldsOf(m.requestType), want.req, `${path} request`);
    t.same(fieldsOf(m.responseType), want.res, `${path} response`);
  }
});

// ---- the bytes: a minimal protobuf reader (varints and length-delimited fields are all this proto uses) ----

function readVarint(buf: Buffer, at: number): [bigint, number] {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    const byte = buf[at++] as number;
    value |= BigInt(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return [value, at];
    shift += 7n;
  }
}

/** field number -> [wire type, raw value] in order of appearance. */
function readFields(buf: Buffer): [number, number, bigint | Buffer][] {
  const out: [number, number, bigint | Buffer][] = [];
  let at = 0;
  while (at < buf.length) {
    const [tag, next] = readVarint(buf, at);
    const number = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (wire === 0) {
      const [v, after] = readVarint(buf, next);
      out.push([number, wire, v]);
      at = after;
    } else if (wire === 2) {
      const [len, start] = readVarint(buf, next);
      out.push([number, wire, buf.subarray(start, start + Number(len))]);
      at = start + Number(len);
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return out;
}

/** A distinct value per field, and how it must appear on the wire under the field's number. */
function sample(fields: Fields): { message: Record<string, unknown>; expect: Map<number, string> } {
  const message: Record<string, unknown> = {};
  const expect = new Map<number, string>();
  for (const [name, [number, type]] of Object.entries(fields)) {
    if (type === 'string') {
      message[name] = `v-${name}`;
      expect.set(number, `2:${Buffer.from(`v-${name}`).toString('hex')}`);
    } else if (type === 'bytes') {
      message[name] = Buffer.from([0xde, 0xad, number]);
      expect.set(number, `2:dead0${number}`);
    } else if (type === 'bool') {
      message[name] = true;
      expect.set(number, '0:1');
    } else if (type === 'uint64') {
      message[name] = '300';
      expect.set(number, '0:300');
    } else {
      message[name] = { k: 'v' };
      // A map entry is a nested message: key = field 1, value = field 2.
      expect.set(number, `2:${Buffer.from([0x0a, 1, 0x6b, 0x12, 1, 0x76]).toString('hex')}`);
    }
  }
  return { message, expect };
}

t.test('on the wire: each field travels under its contract number', async (t) => {
  for (const [path, want] of Object.entries(CONTRACT)) {
    const [service, method] = path.split('/') as [string, string];
    const m = (definition[`${PACKAGE}.${service}`] as protoLoader.ServiceDefinition)[method];
    if (!m) continue;
    for (const [side, fields, serialize] of [['request', want.req, m.requestSerialize], ['response', want.res, m.responseSerialize]] as const) {
      const { message, expect } = sample(fields);
      const seen = new Map(readFields(serialize(message)).map(([n, w, v]) => [n, `${w}:${Buffer.isBuffer(v) ? v.toString('hex') : v.toString()}`]));
      t.same(seen, expect, `${path} ${side}`);
    }
  }
});
