// requestSchema: a JSON Schema compiled once with ajv (cached by its text, so saving an endpoint and
// loading it into the routing table share one compilation) and applied to each call's body.
import { Ajv, type ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';
import { invalidInput } from '../errors.js';

export type BodyCheck = ((body: unknown) => void) | null;

export interface RequestSchemas {
  /** The body check of a schema; null for {} (validation off). Throws INVALID_INPUT naming requestSchema. */
  compile(schema: Record<string, unknown>): BodyCheck;
  readonly compilations: number;
}

const MAX_LISTED = 50;
export const SCHEMA_FAILED = 'request body failed requestSchema validation';

export function createRequestSchemas(maxSchemas = 1000): RequestSchemas {
  const cache = new LRUCache<string, ValidateFunction>({ max: maxSchemas });
  let compilations = 0;

  function check(validate: ValidateFunction) {
    return (body: unknown): void => {
      if (validate(body)) return;
      const all = validate.errors ?? [];
      // Every error is listed, up to a bound: a hostile body must not make the answer megabytes long.
      const errors = all.slice(0, MAX_LISTED).map((e) => ({ path: `body${e.instancePath}`, message: e.message ?? 'is invalid' }));
      const more = all.length > MAX_LISTED ? `; and ${all.length - MAX_LISTED} more` : '';
      throw invalidInput(`${SCHEMA_FAILED}: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}${more}`, { errors });
    };
  }

  return {
    compile(schema) {
      if (Object.keys(schema).length === 0) return null;
      const text = JSON.stringify(schema);
      let validate = cache.get(text);
      if (!validate) {
        // An instance per schema: two schemas declaring the same $id must not collide in one registry.
        // strict off: annotations some tools add (ui hints) are not errors; the meta-schema still applies.
        const ajv = new Ajv({ allErrors: true, strict: false });
        try {
          validate = ajv.compile(schema);
        } catch (err) {
          throw invalidInput(`requestSchema is not a valid JSON Schema: ${(err as Error).message}`);
        }
        compilations++;
        cache.set(text, validate);
      }
      return check(validate);
    },
    get compilations() {
      return compilations;
    },
  };
}
