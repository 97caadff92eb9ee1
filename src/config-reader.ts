// Typed readers over an environment map that collect every problem instead of stopping at the first.
export type Addr = { host: string; port: number } | null;

export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off']);

export function createReader(env: Record<string, string | undefined>) {
  const problems: string[] = [];
  const secrets = new Set<string>();

  const raw = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };

  return {
    problems,
    secrets,
    string(name: string, fallback: string): string {
      return raw(name) ?? fallback;
    },
    optional(name: string): string | undefined {
      return raw(name);
    },
    /** A secret is never echoed back in problems or logs. */
    secret(name: string): string | undefined {
      secrets.add(name);
      return raw(name);
    },
    int(name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
      const v = raw(name);
      if (v === undefined) return fallback;
      if (!/^-?\d+$/.test(v)) {
        problems.push(`${name} must be an integer, got '${v}'`);
        return fallback;
      }
      const n = Number(v);
      if (n < min || n > max) {
        problems.push(`${name} must be between ${min} and ${max}, got ${n}`);
        return fallback;
      }
      return n;
    },
    bool(name: string, fallback: boolean): boolean {
      const v = raw(name);
      if (v === undefined) return fallback;
      const lower = v.toLowerCase();
      if (TRUE.has(lower)) return true;
      if (FALSE.has(lower)) return false;
      problems.push(`${name} must be one of 1/true/yes/on or 0/false/no/off, got '${v}'`);
      return fallback;
    },
    oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
      const v = raw(name);
      if (v === undefined) return fallback;
      if ((allowed as readonly string[]).includes(v)) return v as T;
      problems.push(`${name} must be one of ${allowed.join(', ')}, got '${v}'`);
      return fallback;
    },
    /** host:port, [v6]:port, or "off" to disable the listener. */
    addr(name: string, fallback: string): Addr {
      const v = raw(name) ?? fallback;
      if (v.toLowerCase() === 'off') return null;
      const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(v);
      const port = m ? Number(m[3]) : NaN;
      if (!m || port > 65535) {
        problems.push(`${name} must be host:port, [ipv6]:port or off, got '${v}'`);
        return null;
      }
      return { host: (m[1] ?? m[2]) as string, port };
    },
    url(name: string, fallback: string | undefined, secret = false): string | undefined {
      if (secret) secrets.add(name);
      const v = raw(name) ?? fallback;
      if (v === undefined) return undefined;
      try {
        new URL(v);
        return v;
      } catch {
        problems.push(secret ? `${name} is not a valid URL` : `${name} is not a valid URL: '${v}'`);
        return fallback;
      }
    },
    /** base64 of exactly `bytes` bytes (AES keys). */
    key(name: string, bytes: number): Buffer | undefined {
      secrets.add(name);
      const v = raw(name);
      if (v === undefined) return undefined;
      const buf = Buffer.from(v, 'base64');
      if (buf.length !== bytes || buf.toString('base64').replace(/=+$/, '') !== v.replace(/=+$/, '')) {
        problems.push(`${name} must be base64 of exactly ${bytes} bytes`);
        return undefined;
      }
      return buf;
    },
    list(name: string): string[] {
      const v = raw(name);
      return v === undefined ? [] : v.split(',').map((s) => s.trim()).filter(Boolean);
    },
    problem(message: string): void {
      problems.push(message);
    },
  };
}

export type ConfigReader = ReturnType<typeof createReader>;
