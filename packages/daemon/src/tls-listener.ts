// A TLS listener in front of a gRPC server, so that the node itself sees every refused
// handshake and can log and count it (grpc-js's own TLS server keeps them to itself): it
// terminates TLS with the node's certificate, asks every client for a certificate signed by
// the CA, refuses a connection whose certificate is missing (when required), not signed by
// the CA, or does not name the expected peer, and hands each accepted connection to the gRPC
// server (its connection injector), where handlers can read the verified certificate
// (call.getAuthContext()). A port that also serves the snapshot's pages socket offers its
// ALPN protocol (PAGES_ALPN) before h2: a connection that chose it goes, after the same checks,
// to the pages server instead (roles/snapshot-pull-serve.ts).

import { createServer, type TLSSocket, type Server as TlsServer } from "node:tls";
import type * as grpc from "@grpc/grpc-js";
import { certificateNames, type TlsFiles } from "@vgpu-ha/common";
import { listenOn } from "./listen-on.js";
import { rateLimitedWarn, type WarnLog } from "./refusal-log.js";
import { PAGES_ALPN } from "./roles/snapshot-pull-frames.js";

export type TlsRefusalReason = "handshake" | "certificate" | "identity";

export interface TlsPortOptions {
  readonly files: TlsFiles;
  /** required: a client without a certificate is refused; optional: it may connect. */
  readonly clientCertificates: "required" | "optional";
  /** When set, a client's certificate must name it (CN or DNS subjectAltName). */
  readonly peerName?: string;
  /** Called for every connection refused, with why. */
  readonly onRefused: (reason: TlsRefusalReason, detail: string, remote: string) => void;
  /** Serves connections whose client chose PAGES_ALPN (the replication port's pages socket). */
  readonly pages?: (socket: TLSSocket) => void;
}

/** A client that has not finished its handshake by then is dropped. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

export interface TlsListener {
  readonly port: number;
  close(): void;
}

export async function listenTls(
  listen: string,
  injector: grpc.ConnectionInjector,
  options: TlsPortOptions,
): Promise<TlsListener> {
  const server = createTlsServer(options, (socket) => injector.injectConnection(socket));
  const port = await listenOn(server, listen);
  return { port, close: () => server.close() };
}

/**
 * A TLS server that refuses (and reports) a client whose certificate is not acceptable and
 * hands each accepted connection to `accepted`; it does not listen yet.
 */
export function createTlsServer(
  options: TlsPortOptions,
  accepted: (socket: TLSSocket) => void,
): TlsServer {
  const { files, peerName, onRefused } = options;
  const server = createServer({
    ca: files.ca,
    cert: files.cert,
    key: files.key,
    requestCert: true,
    rejectUnauthorized: options.clientCertificates === "required",
    ALPNProtocols: options.pages ? [PAGES_ALPN, "h2"] : ["h2"],
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
  });
  const remoteOf = (s: { remoteAddress?: string | undefined; remotePort?: number | undefined }) =>
    `${s.remoteAddress ?? "?"}:${s.remotePort ?? "?"}`;
  server.on("tlsClientError", (err, socket) => {
    onRefused("handshake", err.message, remoteOf(socket));
  });
  server.on("secureConnection", (socket: TLSSocket) => {
    socket.on("error", () => undefined); // a peer that resets: the session sees the close
    const cert = socket.getPeerCertificate();
    const presented = cert !== null && Object.keys(cert).length > 0;
    if (presented && !socket.authorized) {
      onRefused("certificate", String(socket.authorizationError), remoteOf(socket));
      socket.destroy();
      return;
    }
    if (peerName !== undefined) {
      const names = presented ? certificateNames(cert) : [];
      if (!names.includes(peerName)) {
        onRefused(
          "identity",
          `certificate names ${names.join(", ") || "nothing"}, expected ${peerName}`,
          remoteOf(socket),
        );
        socket.destroy();
        return;
      }
    }
    if (options.pages && socket.alpnProtocol === PAGES_ALPN) options.pages(socket);
    else accepted(socket);
  });
  return server;
}

/**
 * What a node does with a refused connection: count it (vgpu_tls_refusals_total{port, reason})
 * and log it at warn — at most one line a second per port, with how many were refused since,
 * so a stranger hammering the port cannot flood the log.
 */
export function tlsRefusalReporter(
  port: "guest" | "replication",
  log: WarnLog,
  count: (labels: { port: string; reason: string }) => void,
  nowMs: () => number = () => performance.now(),
): TlsPortOptions["onRefused"] {
  const report = rateLimitedWarn(log, 1000, nowMs);
  return (reason, detail, remote) => {
    count({ port, reason });
    report(port, { port, reason, detail, remote }, `refused a connection on the ${port} port`);
  };
}
