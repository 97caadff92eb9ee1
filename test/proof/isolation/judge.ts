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

/** Replaces each `$key` with the object of the side chosen for that slot, each `#key` with a constant. */
export function fill(value: unknown, world: World, sides: Record<string, 'target' | 'attacker'>): unknown {
  if (typeof value === 'string') {
    const slot = SLOT.exec(value);
    if (slot) {
      const side = world[sides[slot[1]!] ?? 'target'];
      const v = side[slot[1]!];
      if (v === undefined) throw new Error(`fixture names $${slot[1]}, which the world does not have`);
      return v;
    }
    const constant = CONSTANT.exec(value);
    if (constant) {
      const v = world.constants[constant[1]!];
      if (v === undefined) throw new Error(`fixture names #${constant[1]}, which the world does not have`);
      return v;
    }
    // A path: references inside it are filled the same way.
    return value.replace(/([$#])([A-Za-z]+)/g, (whole, sigil: string, key: string) => {
      const v = sigil === '$' ? world[sides[key] ?? 'target'][key] : world.constants[key];
      return v ?? whole;
    });
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, world, sides));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, world, sides)]));
  return value;
}

export interface Variant {
  label: string;
  value: unknown;
}

/**
 * The target's objects in every slot, for every caller; for the other tenant's admin also every mix of its
 * own and the target's objects when an operation takes two or more (the class the probes found: one id in
 * each tenant). Its all-own combination is its own business and is left out.
 */
export function variantsOf(value: unknown, world: World, caller: CallerName): Variant[] {
  const slots = slotsOf(value);
  if (caller !== 'otherAdmin' || slots.length < 2) {
    return [{ label: slots.map((s) => `${s}=target`).join(' ') || 'no slot', value: fill(value, world, {}) }];
  }
  const out: Variant[] = [];
  for (let mask = 0; mask < (1 << slots.length) - 1; mask++) {
    const sides: Record<string, 'target' | 'attacker'> = {};
    slots.forEach((s, i) => { sides[s] = mask & (1 << i) ? 'attacker' : 'target'; });
    out.push({ label: slots.map((s) => `${s}=${sides[s] === 'target' ? 'target' : 'own'}`).join(' '), value: fill(value, world, sides) });
  }
  return out;
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
