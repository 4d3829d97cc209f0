// The HTTP/2 receive windows of a node's gRPC server. grpc-js (as of 1.14) gives a *client* a
// window option (grpc-node.flow_control_window) but a *server* none: every stream and every
// connection it accepts stays at HTTP/2's default 64 KiB, so a guest's 64 KiB dma_write (or
// the primary's 1 MiB entry batch to its standby) waits for WINDOW_UPDATEs through both event
// loops, several times per message. Upstream PR grpc/grpc-node#3058 adds the same option on the
// server (settings.initialWindowSize + session.setLocalWindowSize); until a release has it,
// this module does the same from outside, and is the only place that knows how:
//   - the server's HTTP/2 servers are found in grpc-js's private `http2Servers` map (the node
//     refuses to start if a release moves it, rather than run with the small window);
//   - the stream window is the SETTINGS_INITIAL_WINDOW_SIZE the server sends in its first
//     SETTINGS frame (Http2Server.updateSettings, public Node API);
//   - the connection window is raised on each new session (setLocalWindowSize).
// Memory: Node hands the connection window back as bytes arrive (it only bounds bytes in
// flight); a stream's window comes back only as the stream is read, and grpc-js stops reading a
// stream once it holds a whole message its handler has not taken, so a paused stream holds at
// most about one stream window (plus one incomplete message, which grpc-js reads in full before
// it pauses: bounded by guest-memory.ts). See docs/security.md.
import type { Http2Server, ServerHttp2Session } from "node:http2";
import type * as grpc from "@grpc/grpc-js";
import { invariant } from "@vgpu-ha/common";

/** Receive windows a server gives each HTTP/2 connection it accepts, in bytes. */
export interface ReceiveWindow {
  /** Per stream (SETTINGS_INITIAL_WINDOW_SIZE). */
  readonly streamWindowBytes: number;
  /** Per connection (the session's local window). */
  readonly connectionWindowBytes: number;
}

/** HTTP/2's own window (RFC 9113 §6.9.2), what a peer that says nothing gets. */
export const HTTP2_DEFAULT_WINDOW_BYTES = 65_535;

/** The HTTP/2 servers grpc-js has made for `server` so far (one per bound port or injector). */
export function http2ServersOf(server: grpc.Server): Set<Http2Server> {
  const servers = (server as unknown as { http2Servers?: Map<Http2Server, unknown> }).http2Servers;
  invariant(servers instanceof Map, "grpc-js: Server.http2Servers not found");
  return new Set(servers.keys());
}

/**
 * Gives every connection `http2` accepts from now on the windows of `window`. Call it before
 * the server accepts its first connection (an earlier one keeps 64 KiB).
 */
export function raiseReceiveWindow(http2: Http2Server, window: ReceiveWindow): void {
  http2.updateSettings({ initialWindowSize: window.streamWindowBytes });
  http2.on("session", (session: ServerHttp2Session) => {
    if (session.destroyed) return;
    session.setLocalWindowSize(window.connectionWindowBytes);
  });
}
