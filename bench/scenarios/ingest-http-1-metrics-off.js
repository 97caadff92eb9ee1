// Scenario: ingest-http-1 with SVC_METRICS_ENABLED=false, its twin for the cost of the metrics. Run both in
// one run (`node bench/run.js ingest-http-1 ingest-http-1-metrics-off --rounds 3`): the service in
// ingest-http-1 counts (metrics on is the default), this one does not.
import base, { ONE_RECORD, ingestScenario } from './ingest-http-1.js';

export default {
  ...ingestScenario('ingest-http-1-metrics-off', ONE_RECORD, 1),
  description: 'ingest-http-1 with metrics off (SVC_METRICS_ENABLED=false): the twin that prices the counting',
  target: base.target,
  env: { ...base.env, SVC_METRICS_ENABLED: 'false' },
};
