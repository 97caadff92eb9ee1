// GraphQL operations counted by name and outcome, for the metrics. A name is the one the document gives
// its operation (never a variable or an argument); anonymous operations share one name, and past a fixed
// number of distinct names the rest share "other", so a client inventing names cannot grow the series;
// names too long or carrying an id-like run of hex digits count as "other" too.
// Each compiled document holds its name's counts: an execution adds one to a number, nothing else.

/** Distinct operation names counted on their own; later ones count as "other". */
export const MAX_OPERATION_NAMES = 200;
/** Longer names count as "other" too: a name is an identifier, not a place to carry data. */
const MAX_NAME_CHARS = 64;
/** A run of 8 or more hex digits holding a digit (an id, a key, a hash written into a name): "other". */
const ID_LIKE = /[0-9a-f]*[0-9][0-9a-f]*/gi;

function idLike(name: string): boolean {
  for (const [run] of name.matchAll(ID_LIKE)) if (run.length >= 8) return true;
  return false;
}

export interface OperationCounts {
  readonly name: string;
  /** query, mutation or subscription. */
  readonly type: string;
  /** Executions answered without errors, and with at least one. */
  ok: number;
  error: number;
}

export interface OperationTally {
  /** The counts of an operation, found once when its document is compiled. */
  slot(name: string | undefined, type: string): OperationCounts;
  /** Requests refused before execution: syntax, validation, limits, too deeply nested variables. */
  rejected: number;
  readonly slots: readonly OperationCounts[];
}

export function createOperationTally(maxNames = MAX_OPERATION_NAMES): OperationTally {
  const byKey = new Map<string, OperationCounts>();
  const slots: OperationCounts[] = [];
  const names = new Set<string>();
  return {
    rejected: 0,
    slots,
    slot(raw, type) {
      let name = raw === undefined || raw === '' ? 'anonymous' : raw;
      if (name !== 'anonymous' && (name.length > MAX_NAME_CHARS || idLike(name) || (!names.has(name) && names.size >= maxNames))) name = 'other';
      else if (name !== 'anonymous') names.add(name);
      const key = `${type} ${name}`;
      let counts = byKey.get(key);
      if (counts === undefined) {
        counts = { name, type, ok: 0, error: 0 };
        byKey.set(key, counts);
        slots.push(counts);
      }
      return counts;
    },
  };
}
