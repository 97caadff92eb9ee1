// Scenario: ingest-http-1 at 256 connections (the issue asks for 64 and 256): larger batches per commit,
// so less of each publish goes to the commit itself. Same checks: every acknowledged message stored.
import { ONE_RECORD, ingestScenario } from './ingest-http-1.js';

export default {
  ...ingestScenario('ingest-http-1-256', ONE_RECORD, 1),
  description: 'ingest-http-1 with 256 connections (target: <= 4x the bare handler CPU per request at 256, database included)',
  connections: 256,
  target: { efficiency: 0.25 },
};
