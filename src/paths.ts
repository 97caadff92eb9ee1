// Locations inside the project tree, valid both from src/ (tests) and from dist/src/ (built service).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  // The first package.json above this file is the project's: dist/ and src/ have none of their own.
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('project root (package.json) not found');
    dir = parent;
  }
  return dir;
}

export const projectRoot = findRoot();
export const migrationsDir = path.join(projectRoot, 'sql');
/** Worker task files are always the compiled ones: piscina loads them in fresh threads without a TS loader. */
export const workersDir = path.join(projectRoot, 'dist', 'workers');
export const sourceDir = path.join(projectRoot, 'src');
