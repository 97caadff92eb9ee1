// Structured JSON logging: one line per event, level from config, child loggers carry bindings.
import type { LogLevel } from './config.js';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(bindings: Record<string, unknown>): Logger;
  enabled(level: LogLevel): boolean;
}

type Sink = (line: string) => void;

const stdoutSink: Sink = (line) => {
  process.stdout.write(line);
};

/** Errors lose their fields in JSON.stringify; keep message, code and stack. */
function serialize(value: unknown): unknown {
  if (value instanceof Error) {
    const out: Record<string, unknown> = { name: value.name, message: value.message };
    const code = (value as { code?: unknown }).code;
    if (code !== undefined) out.code = code;
    if (value.stack) out.stack = value.stack;
    if (value.cause !== undefined) out.cause = serialize(value.cause);
    return out;
  }
  return value;
}

export function createLogger(level: LogLevel, sink: Sink = stdoutSink, bindings: Record<string, unknown> = {}): Logger {
  const threshold = ORDER[level];
  const write = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < threshold) return;
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level: lvl, msg, ...bindings };
    if (fields) for (const [k, v] of Object.entries(fields)) entry[k] = serialize(v);
    let line: string;
    try {
      line = JSON.stringify(entry);
    } catch {
      line = JSON.stringify({ time: entry.time, level: lvl, msg, note: 'fields not serializable' });
    }
    sink(line + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (b) => createLogger(level, sink, { ...bindings, ...b }),
    enabled: (l) => ORDER[l] >= threshold,
  };
}
