// Proves that a node's gRPC ports give every HTTP/2 connection the configured receive windows
// (http2-window.ts reaches into grpc-js; this fails if a grpc-js release stops that working): a
// real HTTP/2 client over loopback reads the stream window from the server's SETTINGS and the
// connection window from what the server lets it send, on a plain port, a guarded (guest) port
// and a port left at HTTP/2's default; connections that send garbage or vanish at once leave
// the port serving.
import { type ClientHttp2Session, connect } from "node:http2";
import { createConnection } from "node:net";
import { ConfigSchema } from "@vgpu-ha/common";
import { GuestGuard } from "@vgpu-ha/primary";
import { afterEach, describe, expect, it } from "vitest";
import { HTTP2_DEFAULT_WINDOW_BYTES } from "./http2-window.js";
import { type GrpcServer, guestService, type PortOptions, startGrpcServer } from "./servers.js";

const MiB = 1024 ** 2;
const WINDOW = { streamWindowBytes: 3 * MiB, connectionWindowBytes: 5 * MiB };

const servers: GrpcServer[] = [];
const clients: ClientHttp2Session[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop(100)));
});

async function serve(options: PortOptions): Promise<number> {
  const server = await startGrpcServer(
    "127.0.0.1:0",
    64 * MiB,
    guestService({ session: (stream) => stream.end() }),
    options,
  );
  servers.push(server);
  return server.port;
}

/** The server's stream window (its SETTINGS) and connection window, as a client sees them. */
async function windowsSeen(port: number): Promise<{ stream: number; connection: number }> {
  const client = connect(`http://127.0.0.1:${port}`);
  clients.push(client);
  const settings = await new Promise<{ initialWindowSize?: number }>((resolve, reject) => {
    client.once("remoteSettings", resolve);
    client.once("error", reject);
  });
  // The connection window arrives as a WINDOW_UPDATE right after the SETTINGS: a ping's answer
  // comes after it.
  await new Promise<void>((resolve, reject) => client.ping((e) => (e ? reject(e) : resolve())));
  return {
    stream: settings.initialWindowSize ?? HTTP2_DEFAULT_WINDOW_BYTES,
    connection: client.state.remoteWindowSize ?? Number.NaN,
  };
}

const guard = () => {
  const guest = ConfigSchema.parse({}).guest;
  return {
    guard: new GuestGuard(guest),
    nowMs: () => performance.now(),
    onRefused: () => undefined,
  };
};

describe("HTTP/2 receive windows of a node's gRPC port", () => {
  it("are HTTP/2's 64 KiB when none is given (what the others are measured against)", async () => {
    const port = await serve({});
    expect(await windowsSeen(port)).toEqual({
      stream: HTTP2_DEFAULT_WINDOW_BYTES,
      connection: HTTP2_DEFAULT_WINDOW_BYTES,
    });
  });

  it("are the configured ones on a plain port (the replication port)", async () => {
    const port = await serve({ receiveWindow: WINDOW });
    expect(await windowsSeen(port)).toEqual({ stream: 3 * MiB, connection: 5 * MiB });
  });

  it("are the configured ones on the guest port, behind the guest listener", async () => {
    const port = await serve({ receiveWindow: WINDOW, guard: guard(), maxStreamsPerConnection: 8 });
    expect(await windowsSeen(port)).toEqual({ stream: 3 * MiB, connection: 5 * MiB });
  });

  it.each([
    ["guarded", true],
    ["plain", false],
  ])("survive connections that send garbage or vanish at once (%s port)", async (_, guarded) => {
    const port = await serve({ receiveWindow: WINDOW, ...(guarded ? { guard: guard() } : {}) });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => {
        const socket = createConnection(port, "127.0.0.1");
        socket.on("error", () => undefined);
        return new Promise<void>((resolve) => {
          socket.on("close", () => resolve());
          socket.on("connect", () => {
            if (i % 2 === 0) socket.resetAndDestroy();
            else socket.write(Buffer.alloc(4096, i), () => socket.destroy());
          });
        });
      }),
    );
    expect(await windowsSeen(port)).toEqual({ stream: 3 * MiB, connection: 5 * MiB });
  });

  it("hold for every connection, not only the first", async () => {
    const port = await serve({ receiveWindow: WINDOW, guard: guard() });
    const seen = await Promise.all([windowsSeen(port), windowsSeen(port), windowsSeen(port)]);
    for (const w of seen) expect(w).toEqual({ stream: 3 * MiB, connection: 5 * MiB });
  });
});
