// The gRPC server of the guest port: binds, and stops (gracefully, then by force).
import * as grpc from "@grpc/grpc-js";
import { addService, type ServiceHandlers, wire } from "@vgpu-ha/common";

export interface GuestServer {
  readonly server: grpc.Server;
  readonly port: number;
  stop(graceMs: number): Promise<void>;
}

export async function startGuestServer(options: {
  listen: string;
  handlers: ServiceHandlers<typeof wire.Guest>;
  maxMessageBytes: number;
}): Promise<GuestServer> {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": options.maxMessageBytes,
    "grpc.max_send_message_length": options.maxMessageBytes,
  });
  addService(server, wire.Guest, options.handlers);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(options.listen, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    );
  });
  return {
    server,
    port,
    stop: (graceMs) =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
