// A gRPC client for tests, built from the repository's proto (the same file the service loads): one channel
// per service, calls answered as {err, res} so refusals are asserted like results.
import * as grpc from '@grpc/grpc-js';
import { loadServices, serviceOf, type ServiceName } from '../../src/grpc/server.js';

export interface Reply {
  err: grpc.ServiceError | null;
  res: any;
}

export interface CallOptions {
  /** Sent as `authorization: Bearer <token>`. */
  token?: string;
  /** Raw `authorization` metadata value (wins over token). */
  authorization?: string;
  /** Milliseconds from now; default 10 s. */
  deadlineMs?: number;
}

export interface TestClient {
  call(service: ServiceName, method: string, request: Record<string, unknown>, options?: CallOptions): Promise<Reply>;
  close(): void;
}

export function grpcClient(target: string, credentials = grpc.credentials.createInsecure(), channelOptions: grpc.ChannelOptions = {}): TestClient {
  const services = loadServices();
  const clients = new Map<ServiceName, grpc.Client>();
  const clientOf = (name: ServiceName) => {
    let c = clients.get(name);
    if (!c) clients.set(name, (c = new (serviceOf(services, name))(target, credentials, channelOptions)));
    return c as unknown as Record<string, (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void>;
  };
  return {
    call(service, method, request, options = {}) {
      const md = new grpc.Metadata();
      const authorization = options.authorization ?? (options.token ? `Bearer ${options.token}` : undefined);
      if (authorization !== undefined) md.set('authorization', authorization);
      const client = clientOf(service);
      const fn = client[method];
      if (!fn) throw new Error(`${service} has no method ${method}`);
      return new Promise((resolve) => {
        fn.call(client, request, md, { deadline: Date.now() + (options.deadlineMs ?? 10_000) }, (err, res) => resolve({ err, res }));
      });
    },
    close() {
      for (const c of clients.values()) c.close();
    },
  };
}
