// What may follow the channel in a publish topic, whatever the protocol (HTTP path, MQTT topic, CoAP
// URI): up to 16 '/'-separated segments, each 1-64 letters, digits or _ . : - (not '.' or '..'). One
// rule, so a stored subtopic reads the same whichever way it arrived and never needs quoting, escaping
// or trimming.
import { invalidInput } from '../errors.js';

export const MAX_SUBTOPIC_SEGMENTS = 16;
const SEGMENT = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Why these segments are no subtopic, or null when they are one. */
export function subtopicProblem(segments: readonly string[]): string | null {
  if (segments.length > MAX_SUBTOPIC_SEGMENTS) return `a subtopic has at most ${MAX_SUBTOPIC_SEGMENTS} segments`;
  for (const s of segments) {
    if (!SEGMENT.test(s)) return 'subtopic segments are 1-64 letters, digits or _ . : -';
    // Path syntax, not names: a bridge, a proxy or a file-backed consumer may resolve them to another topic.
    if (s === '.' || s === '..') return "subtopic segments '.' and '..' are not allowed";
  }
  return null;
}

/** A `subtopic` query parameter (reader filter, live socket): the subtopic, null when absent or empty, 400 when malformed. */
export function subtopicParam(value: string | null | undefined): string | null {
  if (value === null || value === undefined || value === '') return null;
  const problem = subtopicProblem(value.split('/'));
  if (problem !== null) throw invalidInput(`'subtopic': ${problem}`);
  return value;
}
