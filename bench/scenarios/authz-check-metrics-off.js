// Scenario: authz-check with SVC_METRICS_ENABLED=false, its twin for the cost of the metrics. Run both in
// one run (`node bench/run.js authz-check authz-check-metrics-off --rounds 3`): the service in authz-check
// counts (metrics on is the default), this one does not; the efficiencies should agree within noise.
import base from './authz-check.js';

export default {
  ...base,
  name: 'authz-check-metrics-off',
  description: 'authz-check with metrics off (SVC_METRICS_ENABLED=false): the twin that prices the counting',
  env: { ...base.env, SVC_METRICS_ENABLED: 'false' },
};
