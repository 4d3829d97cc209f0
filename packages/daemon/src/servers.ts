// The node's gRPC servers: the guest port and the replication port. Each dispatches to
// whatever role the node has at the moment a stream arrives, and each also serves the standard
// gRPC health service (grpc.health.v1.Health, from the grpc-node team's grpc-health-check):
// the port's own service ("vgpu.v1.Guest" or "vgpu.v1.Replication") and the whole server ("")
// are SERVING only while the node's role serves that port — the guest port on a primary or a
// standalone node, the replication port on a standby — and NOT_SERVING otherwise (while the
// node starts, on the other role, and once it stops). The node sets them on each role change.
import * as grpc from "@grpc/grpc-js";
import { addService, type ServiceHandlers, wire } from "@vgpu-ha/common";
import { HealthImplementation } from "grpc-health-check";

export interface GrpcServer {
  readonly port: number;
  /** The health service's answer for this port's service and for "" (the whole server). */
  setServing(serving: boolean): void;
  stop(graceMs: number): Promise<void>;
}

/** Adds one service to a server; `serviceName` is its full name, for the health service. */
export interface ServiceRegistrar {
  (server: grpc.Server): void;
  readonly serviceName: string;
}

export async function startGrpcServer(
  listen: string,
  maxMessageBytes: number,
  register: ServiceRegistrar,
): Promise<GrpcServer> {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
  });
  register(server);
  const health = new HealthImplementation({
    "": "NOT_SERVING",
    [register.serviceName]: "NOT_SERVING",
  });
  health.addToServer(server);
  const setServing = (serving: boolean) => {
    const status = serving ? "SERVING" : "NOT_SERVING";
    health.setStatus("", status);
    health.setStatus(register.serviceName, status);
  };
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(listen, grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return {
    port,
    setServing,
    stop: (graceMs) =>
      new Promise<void>((resolve) => {
        setServing(false);
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

export const guestService = (handlers: ServiceHandlers<typeof wire.Guest>): ServiceRegistrar =>
  Object.assign((s: grpc.Server) => addService(s, wire.Guest, handlers), {
    serviceName: wire.Guest.typeName,
  });

export const replicationService = (
  handlers: ServiceHandlers<typeof wire.Replication>,
): ServiceRegistrar =>
  Object.assign((s: grpc.Server) => addService(s, wire.Replication, handlers), {
    serviceName: wire.Replication.typeName,
  });
