// An HTTP/2 client session to a node's guest port, plaintext or TLS, for the raw attacks (the
// gRPC library hides what they need: stream resets, streams without a message).
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import { connect } from "node:net";
import type { AttackerTls } from "./outcome.js";
import { attackerAddress, splitTarget } from "./target.js";

export const GUEST_PATH = "/vgpu.v1.Guest/Session";

export const GRPC_HEADERS = {
  ":method": "POST",
  ":path": GUEST_PATH,
  "content-type": "application/grpc",
  te: "trailers",
} as const;

/**
 * `maxSessionMemoryMb`: what this client's HTTP/2 session may queue (Node's default, 10 MB,
 * makes it reset its own streams while it writes large messages).
 */
export function connectH2(
  target: string,
  tls?: AttackerTls,
  maxSessionMemoryMb?: number,
): http2.ClientHttp2Session {
  const { host, port } = splitTarget(target);
  const from = attackerAddress(host);
  const memory = maxSessionMemoryMb === undefined ? {} : { maxSessionMemory: maxSessionMemoryMb };
  if (!tls) {
    return http2.connect(`http://${target}`, {
      ...memory,
      createConnection: () => connect({ host, port, ...from }),
    });
  }
  return http2.connect(`https://${target}`, {
    ...memory,
    ...from,
    ca: readFileSync(tls.ca),
    cert: readFileSync(tls.cert),
    key: readFileSync(tls.key),
    servername: tls.serverName,
  });
}
