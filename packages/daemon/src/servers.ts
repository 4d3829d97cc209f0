// The node's gRPC servers: the guest port and the replication port. Each dispatches to
// whatever role the node has at the moment a stream arrives.
import * as grpc from "@grpc/grpc-js";
import { addService, type ServiceHandlers, wire } from "@vgpu-ha/common";

export interface GrpcServer {
  readonly port: number;
  stop(graceMs: number): Promise<void>;
}

export async function startGrpcServer(
  listen: string,
  maxMessageBytes: number,
  register: (server: grpc.Server) => void,
): Promise<GrpcServer> {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
  });
  register(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(listen, grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return {
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

export const guestService = (handlers: ServiceHandlers<typeof wire.Guest>) => (s: grpc.Server) =>
  addService(s, wire.Guest, handlers);

export const replicationService =
  (handlers: ServiceHandlers<typeof wire.Replication>) => (s: grpc.Server) =>
    addService(s, wire.Replication, handlers);
