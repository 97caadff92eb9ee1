// Owns the harness's fixed locations, so every module agrees where the repo, scenarios and results are.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = join(benchDir, '..');
export const scenariosDir = join(benchDir, 'scenarios');
export const resultsDir = join(benchDir, 'results');
