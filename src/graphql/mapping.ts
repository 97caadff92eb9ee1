// Row-to-GraphQL conversions shared by domains: timestamps as ISO 8601 strings.

/** postgres.js gives Date objects; rows built by json_agg give strings: both become ISO 8601. */
export function iso(value: string | Date | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
