// How a node dials its peer's replication port when tls is configured: with its own
// certificate, trusting only the CA, and accepting the server only if its certificate names
// peer.name (CN or DNS subjectAltName) — whatever address it was reached at. The same
// credentials serve the replication stream and Probe.
import * as grpc from "@grpc/grpc-js";
import { certificateNames } from "./cert-names.js";
import type { TlsFiles } from "./tls-files.js";

export interface PeerChannel {
  readonly credentials: grpc.ChannelCredentials;
  /** Channel options to add (the TLS server name the node asks for: peer.name). */
  readonly options: grpc.ChannelOptions;
}

/** Plaintext without tls files; mutual TLS checking the server is `peerName` with them. */
export function peerChannel(files: TlsFiles | undefined, peerName: string): PeerChannel {
  if (files === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const credentials = grpc.credentials.createSsl(files.ca, files.key, files.cert, {
    checkServerIdentity: (_host, cert) => {
      const names = certificateNames(cert);
      return names.includes(peerName)
        ? undefined
        : new Error(`peer certificate names ${names.join(", ") || "nothing"}, not ${peerName}`);
    },
  });
  return { credentials, options: { "grpc.ssl_target_name_override": peerName } };
}
