// The node's gRPC servers: the guest port and the replication port. Each dispatches to
// whatever role the node has at the moment a stream arrives, and each also serves the standard
// gRPC health service (grpc.health.v1.Health, from the grpc-node team's grpc-health-check):
// the port's own service ("vgpu.v1.Guest" or "vgpu.v1.Replication") and the whole server ("")
// are SERVING only while the node's role serves that port — the guest port on a primary or a
// standalone node, the replication port on a standby — and NOT_SERVING otherwise (while the
// node starts, on the other role, and once it stops). The node sets them on each role change.

import type { Http2Server } from "node:http2";
import { createServer as createNetServer, type Socket } from "node:net";
import * as grpc from "@grpc/grpc-js";
import {
  addService,
  decodePrimaryStreamBytes,
  invariant,
  type ServiceHandlers,
  wire,
} from "@vgpu-ha/common";
import { HealthImplementation } from "grpc-health-check";
import { type GuestListenerOptions, listenGuest } from "./guest-listener.js";
import { http2ServersOf, type ReceiveWindow, raiseReceiveWindow } from "./http2-window.js";
import { listenOn } from "./listen-on.js";
import { PAGES_MAGIC } from "./roles/snapshot-pull-frames.js";
import { listenTls, type TlsPortOptions } from "./tls-listener.js";

export interface GrpcServer {
  readonly port: number;
  /**
   * Open HTTP/2 streams of the connection a call came on (its getPeer()); ports with a guard
   * only (0 otherwise).
   */
  streamsOf(peer: string): number;
  /** Bytes held in incomplete gRPC messages of the port's streams (ports with a guard; else 0). */
  incompleteBytes(): number;
  /** The health service's answer for this port's service and for "" (the whole server). */
  setServing(serving: boolean): void;
  stop(graceMs: number): Promise<void>;
}

/** Adds one service to a server; `serviceName` is its full name, for the health service. */
export interface ServiceRegistrar {
  (server: grpc.Server): void;
  readonly serviceName: string;
}

/**
 * What a port may add: a bound on streams per connection, TLS (tls-listener.ts), the guest
 * listener's defences (guest-listener.ts).
 */
export interface PortOptions {
  /**
   * HTTP/2 streams (sessions) one connection may have open at once. With a guard, HTTP/2
   * advertises STREAM_LIMIT_MARGIN more, so that a stream over the limit reaches the node and
   * is answered with the limit (the caller checks streamsOf) instead of waiting in the client's
   * queue, or being refused by HTTP/2 (which ends a connection after 100 refusals).
   */
  readonly maxStreamsPerConnection?: number;
  /** Serve TLS with these files and rules instead of plaintext. */
  readonly tls?: TlsPortOptions;
  /** Terminate TCP in the node's own listener and apply the guest defences. */
  readonly guard?: Omit<GuestListenerOptions, "tls">;
  /** HTTP/2 receive windows of each accepted connection (http2-window.ts); 64 KiB if left out. */
  readonly receiveWindow?: ReceiveWindow;
  /**
   * The replication port's second protocol, the snapshot's pages socket: a TLS client that
   * chose its ALPN protocol, or a plaintext one whose first byte is PAGES_MAGIC's (HTTP/2's
   * preface starts "P"), is handed here instead of to gRPC. Not with a guard.
   */
  readonly pages?: (socket: Socket) => void;
}

/**
 * Streams HTTP/2 lets a guarded connection open above the node's limit. A client that sends
 * its first streams before it has the node's SETTINGS (the client library puts up to 64 on a
 * new connection) must not meet HTTP/2's own refusal, only the node's answer naming the limit.
 */
const STREAM_LIMIT_MARGIN = 128;

export async function startGrpcServer(
  listen: string,
  maxMessageBytes: number,
  register: ServiceRegistrar,
  options: PortOptions = {},
): Promise<GrpcServer> {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
    // Nothing reads channelz, and its bookkeeping was a visible part of each new stream's cost.
    "grpc.enable_channelz": 0,
    ...(options.maxStreamsPerConnection !== undefined
      ? {
          "grpc.max_concurrent_streams":
            options.maxStreamsPerConnection +
            (options.guard !== undefined ? STREAM_LIMIT_MARGIN : 0),
        }
      : {}),
  });
  invariant(!(options.pages && options.guard), "a guarded port serves no pages socket");
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
  // Every port ends TCP (and TLS) in a listener of ours and hands the socket to grpc-js through
  // a connection injector: so the HTTP/2 server behind it is known before the first connection.
  const { injector, http2 } = injectorWithServer(server);
  if (options.receiveWindow) raiseReceiveWindow(http2, options.receiveWindow);
  let front: {
    port: number;
    close(): void;
    streamsOf?(peer: string): number;
    incompleteBytes?(): number;
  };
  if (options.guard) {
    // Our listener counts and refuses per source; gRPC gets the stream.
    front = await listenGuest(listen, injector, http2, {
      ...options.guard,
      ...(options.tls ? { tls: options.tls } : {}),
    });
  } else if (options.tls) {
    // TLS is terminated in front (to see refused handshakes); gRPC gets the decrypted stream.
    front = await listenTls(listen, injector, {
      ...options.tls,
      ...(options.pages ? { pages: options.pages } : {}),
    });
  } else {
    // Nagle off: grpc-js's own listener (bindAsync) leaves it on, and a standby's small ack
    // written while its previous one is unacknowledged then waits for the primary's delayed TCP
    // ACK (docs/gpu.md: the sync gemm pair's 86-121 ms stalls). Tried in 84122b5 and reverted
    // in 72d9522 after hostile.test.ts sessions-400 failed there; it passes with this listener
    // (docs/benchmarks.md, "DMA 64 KiB").
    const pages = options.pages;
    const plain = createNetServer({ noDelay: true }, (socket) =>
      pages ? routeByFirstByte(socket, injector, pages) : injector.injectConnection(socket),
    );
    front = { port: await listenOn(plain, listen), close: () => plain.close() };
  }
  const port = front.port;
  return {
    port,
    streamsOf: (peer) => front.streamsOf?.(peer) ?? 0,
    incompleteBytes: () => front.incompleteBytes?.() ?? 0,
    setServing,
    stop: (graceMs) =>
      new Promise<void>((resolve) => {
        setServing(false);
        front.close();
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

/** A plaintext replication client that has sent nothing by then is dropped. */
const FIRST_BYTE_TIMEOUT_MS = 10_000;

/**
 * Reads a plaintext connection's first bytes and gives the socket, those bytes put back, to
 * the pages server (PAGES_MAGIC) or to gRPC (anything else: its HTTP/2 preface).
 */
function routeByFirstByte(
  socket: Socket,
  injector: grpc.ConnectionInjector,
  pages: (socket: Socket) => void,
): void {
  socket.on("error", () => undefined); // a reset before the first byte: nothing to tell
  // Every client speaks first (HTTP/2's preface, the pages magic): one that does not is dropped.
  const silent = setTimeout(() => socket.destroy(), FIRST_BYTE_TIMEOUT_MS);
  socket.once("close", () => clearTimeout(silent));
  socket.once("data", (first: Buffer) => {
    clearTimeout(silent);
    socket.pause();
    socket.unshift(first);
    if (first[0] === PAGES_MAGIC[0]) pages(socket);
    else injector.injectConnection(socket);
  });
}

export const guestService = (handlers: ServiceHandlers<typeof wire.Guest>): ServiceRegistrar =>
  Object.assign((s: grpc.Server) => addService(s, wire.Guest, handlers), {
    serviceName: wire.Guest.typeName,
  });

export const replicationService = (
  handlers: ServiceHandlers<typeof wire.Replication>,
): ServiceRegistrar =>
  // The stream's chunk 0 is read by its own codec (decodePrimaryStreamBytes).
  Object.assign(
    (s: grpc.Server) =>
      addService(s, wire.Replication, handlers, { stream: decodePrimaryStreamBytes }),
    {
      serviceName: wire.Replication.typeName,
    },
  );

/**
 * A connection injector and the HTTP/2 server behind it, whose "session" events let the guest
 * listener watch each connection's streams and http2-window.ts raise its windows. grpc-js keeps
 * that server in a private map (as of 1.14); if a release moves it, the node refuses to start
 * rather than run without defences.
 */
function injectorWithServer(server: grpc.Server): {
  injector: grpc.ConnectionInjector;
  http2: Http2Server;
} {
  const before = http2ServersOf(server);
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const added = [...http2ServersOf(server)].filter((s) => !before.has(s));
  invariant(added.length === 1, "grpc-js: the connection injector's HTTP/2 server not found");
  return { injector, http2: added[0]! };
}
