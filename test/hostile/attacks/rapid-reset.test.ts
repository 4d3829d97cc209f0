// Proves the hand-written HTTP/2 frames of the rapid reset are real HTTP/2: Node's own http2
// server, on loopback, takes a stream opened with them as a gRPC call to the guest service's
// path, and a rapid reset at it runs its time, the server taking stream after stream until at
// most its own flood defence ends a connection, and stops on time.
import { once } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GUEST_PATH } from "./h2-connect.js";
import { emptySettings, FRAME, frame, grpcHeaderBlock, PREFACE } from "./h2-frames.js";
import { rapidReset } from "./rapid-reset.js";

let server: http2.Http2Server;
let target: string;
const seen: string[] = [];
const errors: string[] = [];
const sessions = new Set<http2.ServerHttp2Session>();

beforeEach(async () => {
  seen.length = 0;
  errors.length = 0;
  server = http2.createServer();
  server.on("stream", (stream, headers) => {
    seen.push(`${headers[":method"]} ${headers[":path"]} ${headers["content-type"]} ${headers.te}`);
    stream.on("error", () => undefined);
  });
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
    s.on("frameError", (type, code) => errors.push(`frame error ${type}/${code}`));
    s.on("error", (e) => errors.push(e.message));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  // server.close waits for every session: end what the attack left half-open first.
  for (const s of sessions) s.destroy();
  await new Promise((r) => server.close(r));
});

describe("the rapid reset's frames", () => {
  it("open a stream the server takes as a gRPC call to the guest service", async () => {
    const socket = connect({ host: "127.0.0.1", port: Number(target.split(":")[1]) });
    await once(socket, "connect");
    const block = grpcHeaderBlock(target, GUEST_PATH, "http");
    socket.write(Buffer.concat([PREFACE, emptySettings(), frame(FRAME.HEADERS, 0x4, 1, block)]));
    const deadline = performance.now() + 5000;
    while (seen.length === 0 && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    socket.destroy();
    expect(seen).toEqual([`POST ${GUEST_PATH} application/grpc trailers`]);
  });

  it("reset streams for the time given, every one a stream the server took", async () => {
    const started = performance.now();
    const outcome = await rapidReset({ target, connections: 2, durationMs: 300 });
    expect(performance.now() - started).toBeLessThan(5000);
    expect(outcome.sent["streams reset"]).toBeGreaterThan(0);
    // A frame the server could not parse would fail the first stream of each connection. What
    // may end a connection is Node's own rapid-reset defence, after many good streams: a GOAWAY
    // INTERNAL_ERROR (Node 20) or a session "Protocol error" (Node 22 and 24), once per
    // connection at most (the attack dials again when one ends).
    expect(seen.length).toBeGreaterThan(100);
    const goaways = Object.keys(outcome.answers).filter((k) => k.startsWith("goaway"));
    expect(goaways.filter((k) => k !== "goaway:INTERNAL_ERROR")).toEqual([]);
    expect(errors.length).toBeLessThanOrEqual(outcome.sent.connections ?? 0);
  });
});
