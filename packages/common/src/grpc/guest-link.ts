// A grpc-js server stream of the guest API as the GuestLink port (core/ports.ts): the daemon's
// edge between gRPC and the guest service, which the simulator replaces with its own streams.
import type * as grpc from "@grpc/grpc-js";
import type { GuestLink } from "../core/ports.js";
import { certificateNames } from "../tls/cert-names.js";
import type * as wire from "../wire/messages.js";

export type GuestServerStream = grpc.ServerDuplexStream<wire.GuestMessage, wire.NodeMessage>;

export function grpcGuestLink(stream: GuestServerStream): GuestLink {
  const cert = stream.getAuthContext?.().sslPeerCertificate;
  return {
    get remote() {
      return stream.getPeer();
    },
    certificateNames: cert ? certificateNames(cert) : [],
    get writable() {
      return stream.writable;
    },
    send: (message) => {
      stream.write(message);
    },
    end: () => {
      stream.end();
    },
    pause: () => {
      stream.pause();
    },
    resume: () => {
      stream.resume();
    },
    onMessage: (handler) => {
      stream.on("data", handler);
    },
    onEnd: (handler) => {
      stream.on("end", handler);
    },
    onGone: (handler) => {
      stream.on("error", handler);
      stream.on("cancelled", handler);
    },
  };
}
