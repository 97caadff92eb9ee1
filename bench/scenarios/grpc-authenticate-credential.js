// Scenario: gRPC AuthService.AuthenticateCredential, a protocol adapter checking device shared keys (by
// entity UUID, in the device's tenant) over one channel with many calls in flight: the caller's bearer,
// the gate and the keys all cached. Against the empty unary method in the same run (lib/grpc-bench.js).
import { grpcScenario } from '../lib/grpc-bench.js';

export default grpcScenario({
  name: 'grpc-authenticate-credential',
  description: 'gRPC AuthenticateCredential (shared keys, cached) vs the empty unary method, one channel, same run',
  service: 'AuthService',
  method: 'AuthenticateCredential',
  requestsOf: (w) => w.devices.map((id, i) => ({ identifier: id, secret: w.keys[i], kind: 'shared_key', tenant_id: w.tenant })),
});
