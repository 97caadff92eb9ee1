// Scenario: gRPC AuthzService.Check, a protocol adapter asking whether devices may publish to a channel
// over one channel with many calls in flight: the caller's bearer, the gate and the decisions memoised.
// Against the empty unary method in the same run (lib/grpc-bench.js).
import { grpcScenario } from '../lib/grpc-bench.js';

export default grpcScenario({
  name: 'grpc-check',
  description: 'gRPC AuthzService.Check (decisions memoised) vs the empty unary method, one channel, same run',
  service: 'AuthzService',
  method: 'Check',
  requestsOf: (w) => w.devices.map((id) => ({ subject_id: id, action: 'publish', resource_id: w.channel })),
});
