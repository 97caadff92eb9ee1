// Shared by every surface of the matrix: filling a fixture's `$key`/`#key` references, the own/foreign
// combinations, and the verdict on one answer (refused cleanly; nothing of the target returned or counted).
import type { CallerName, World } from './world.js';

const SLOT = /^\$([A-Za-z]+)$/;
const CONSTANT = /^#([A-Za-z]+)$/;

/** The distinct `$key` slots of a fixture value, in order of appearance. */
export function slotsOf(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') {
    for (const m of value.matchAll(/\$([A-Za-z]+)/g)) if (!out.includes(m[1]!)) out.push(m[1]!);
  } else if (Array.isArray(value)) {
    for (const v of value) slotsOf(v, out);
  } else if (value && typeof value === 'object') {
    for (const v of Object.values(value)) slotsOf(v, out);
  }
  return out;
}

export type SideName = 'target' | 'attacker' | 'ghost';

/**
 * Replaces each `$key` with the object of the side chosen for that slot, each `#key` with a constant. The
 * ghost side (ids that never existed) also swaps the constants that name a target object (its alias).
 */
export function fill(value: unknown, world: World, sides: Record<string, SideName>, ghost = false): unknown {
  const constants = ghost ? { ...world.constants, ...world.ghostConstants } : world.constants;
  if (typeof value === 'string') {
    const slot = SLOT.exec(value);
    if (slot) {
      const side = world[sides[slot[1]!] ?? (ghost ? 'ghost' : 'target')];
      const v = side[slot[1]!];
      if (v === undefined) throw new Error(`fixture names $${slot[1]}, which the world does not have`);
      return v;
    }
    const constant = CONSTANT.exec(value);
    if (constant) {
      const v = constants[constant[1]!];
      if (v === undefined) throw new Error(`fixture names #${constant[1]}, which the world does not have`);
      return v;
    }
    // A path: references inside it are filled the same way.
    return value.replace(/([$#])([A-Za-z]+)/g, (whole, sigil: string, key: string) => {
      const v = sigil === '$' ? world[sides[key] ?? (ghost ? 'ghost' : 'target')][key] : constants[key];
      return v ?? whole;
    });
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, world, sides, ghost));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, world, sides, ghost)]));
  return value;
}

export interface Variant {
  label: string;
  value: unknown;
  /**
   * The existence-oracle twin: the same call with every target object (and the target's alias) swapped
   * for one that never existed. Refused callers must not be able to tell the two apart.
   */
  twin?: { value: unknown; swapped: string[] };
}

/** The twin of a fill: target slots become ghost slots; the strings swapped, for normalizing answers. */
function twinOf(value: unknown, world: World, sides: Record<string, SideName>, caller: CallerName): Variant['twin'] {
  const slots = slotsOf(value);
  const swapped: string[] = [];
  const ghostSides: Record<string, SideName> = {};
  const known = KNOWN_TO[caller];
  const member = known !== undefined;
  for (const s of slots) {
    ghostSides[s] = sides[s] === 'attacker' ? 'attacker' : known?.(s) ? 'target' : 'ghost';
    if (ghostSides[s] === 'ghost') swapped.push(world.target[s]!, world.ghost[s]!);
  }
  for (const m of JSON.stringify(value).matchAll(/#([A-Za-z]+)/g)) {
    if (!member && world.ghostConstants[m[1]!]) swapped.push(world.constants[m[1]!]!, world.ghostConstants[m[1]!]!);
  }
  if (swapped.length === 0) return undefined;
  return { value: fill(value, world, ghostSides, !member), swapped };
}

/** Credential-kind objects: a tenant-scope read does not cover them (issue 35.6). */
const SENSITIVE = new Set(['sharedKey', 'accessToken', 'certificate', 'certificateSerial', 'certificateFingerprint', 'session', 'invitation']);

/**
 * What the callers that belong to the target tenant may know exists, so their twins keep it: their own
 * tenant (and its alias); the read-only member every object a tenant-scope read shows; the device the
 * channel it publishes on; the scoped token the channel of its ceiling. The other tenant's admin and the
 * anonymous caller know nothing of the target.
 */
const KNOWN_TO: Partial<Record<CallerName, (slot: string) => boolean>> = {
  reader: (slot) => !SENSITIVE.has(slot),
  device: (slot) => slot === 'tenant' || slot === 'channel',
  scopedToken: (slot) => slot === 'tenant' || slot === 'ceilingChannel',
};

/**
 * The target's objects in every slot, for every caller; for the other tenant's admin also every mix of its
 * own and the target's objects when an operation takes two or more (the class the probes found: one id in
 * each tenant). Its all-own combination is its own business and is left out. Each variant carries its
 * never-existing twin.
 */
export function variantsOf(value: unknown, world: World, caller: CallerName): Variant[] {
  const slots = slotsOf(value);
  if (caller !== 'otherAdmin' || slots.length < 2) {
    return [{ label: slots.map((s) => `${s}=target`).join(' ') || 'no slot', value: fill(value, world, {}), twin: twinOf(value, world, {}, caller) }];
  }
  const out: Variant[] = [];
  for (let mask = 0; mask < (1 << slots.length) - 1; mask++) {
    const sides: Record<string, SideName> = {};
    slots.forEach((s, i) => { sides[s] = mask & (1 << i) ? 'attacker' : 'target'; });
    out.push({
      label: slots.map((s) => `${s}=${sides[s] === 'target' ? 'target' : 'own'}`).join(' '),
      value: fill(value, world, sides), twin: twinOf(value, world, sides, caller),
    });
  }
  return out;
}

/**
 * An answer as a refused caller sees it, for comparing twins: request ids dropped (they differ per call),
 * the swapped ids (the target's and the ghost's) replaced by one placeholder.
 */
export function comparable(answer: unknown, swapped: string[]): string {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).filter(([k]) => !/^request_?id$/i.test(k)).map(([k, x]) => [k, strip(x)]));
    return v;
  };
  let text = JSON.stringify(strip(answer)) ?? 'undefined';
  // Longest first: an id inside a path is replaced before anything shorter could split it.
  for (const s of [...swapped].sort((a, b) => b.length - a.length)) if (s) text = text.split(s).join('<id>');
  return text;
}

export const ORACLE = 'tells an existing object from a missing one';

/** The twin verdict: empty when the real object's refusal and the never-existing one's are the same. */
export function oracle(where: string, real: string, ghost: string): string[] {
  return real === ghost ? [] : [`${where}: ${ORACLE}: ${real.slice(0, 220)} <> ${ghost.slice(0, 220)}`];
}

/**
 * Splits a row's findings into existence oracles (by caller, judged against the known list) and the rest.
 * `where` starts with the caller's name.
 */
export function oraclesOf(problems: string[]): { callers: string[]; rest: string[]; examples: string[] } {
  const found = problems.filter((p) => p.includes(`: ${ORACLE}: `));
  return {
    callers: [...new Set(found.map((p) => p.split(' ')[0]!))].sort(),
    rest: problems.filter((p) => !found.includes(p)),
    examples: found.slice(0, 2),
  };
}

/** Markers of the target found in an answer, leaving out what the request itself carried. */
export function leaksIn(answer: string, request: string, world: World): string[] {
  return world.markers.filter((m) => m.length >= 6 && !request.includes(m) && answer.includes(m));
}

/** Every {total, items} page whose total is not what it shows: rows counted that the caller cannot see. */
export function hiddenCounts(value: unknown, path = 'data'): string[] {
  const out: string[] = [];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...hiddenCounts(v, `${path}[${i}]`)));
  else if (value && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    if (typeof o.total === 'number' && Array.isArray(o.items) && o.total !== o.items.length && o.items.length < 50) {
      out.push(`${path}: total ${o.total} but ${o.items.length} items shown`);
    }
    for (const [k, v] of Object.entries(o)) out.push(...hiddenCounts(v, `${path}.${k}`));
  }
  return out;
}
