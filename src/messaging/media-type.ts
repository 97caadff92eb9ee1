// The payload format every transport hands the pipeline, and how a stated media type is compared.
export const SENML_JSON = 'application/senml+json';

/** A media type without its parameters, in lower case ('Application/JSON; charset=utf-8' → 'application/json'). */
export function mediaTypeOf(contentType: string): string {
  const semi = contentType.indexOf(';');
  return (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}
