// Attribute validation against a profile version's JSON Schema: compiled once per version, kept in an LRU.
import { Ajv, type ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';
import { invalidInput } from '../errors.js';

export interface SchemaValidator {
  /** Throws INVALID_INPUT naming every failing attribute path. */
  check(versionId: string, version: number, schema: Record<string, unknown>, attributes: Record<string, unknown>): void;
  /** Rejects a schema that does not compile (at version creation), with the compiler's message. */
  assertCompiles(schema: Record<string, unknown>): void;
}

export function createSchemaValidator(maxVersions = 1000): SchemaValidator {
  // strict: false keeps unknown keywords (ui hints some tools put in schemas) from failing compilation.
  const ajv = new Ajv({ allErrors: true, strict: false });
  const compiled = new LRUCache<string, ValidateFunction>({ max: maxVersions });

  function compile(schema: Record<string, unknown>): ValidateFunction {
    try {
      return ajv.compile(schema);
    } catch (err) {
      throw invalidInput(`jsonSchema is not a valid JSON Schema: ${(err as Error).message}`);
    }
  }

  return {
    check(versionId, version, schema, attributes) {
      let validate = compiled.get(versionId);
      if (!validate) {
        validate = compile(schema);
        compiled.set(versionId, validate);
      }
      if (validate(attributes)) return;
      const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
      throw invalidInput(`attributes do not match profile version ${version}: ${problems.join('; ')}`, {
        errors: (validate.errors ?? []).map((e) => ({ path: e.instancePath || '/', message: e.message ?? 'is invalid' })),
      });
    },
    assertCompiles(schema) {
      compile(schema);
    },
  };
}
