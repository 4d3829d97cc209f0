// Proves the pages socket end to end on loopback, on the replication port's own listener
// (servers.ts: plaintext sniffed by its first byte, TLS routed by ALPN) in front of a real
// Sender and SnapshotOutlet: a pull gets every chunk from the one asked, each decoded with its
// pages as its own buffer, then an end; a hello of another cluster, peer, epoch or snapshot is
// refused with the PullSnapshot codes before any chunk; a hello that is late, over its bound or
// not a hello ends the connection; mutual TLS refuses a client certificate
// from another CA; a port without the socket (an older primary) is told apart and the pull goes
// to gRPC instead; a connection cut in the middle of a frame ends the pull with that reason;
// a chunk's receive buffer is reused for a later chunk once given back (pagesReturn, as the
// device does after writing it), and never while it is held; a connection made ahead
// (preconnect) carries the next pull, and one the primary dropped for want of a hello is made
// again.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  ErrorCode,
  type PrimaryMessage,
  ReplicationLog,
  type ServiceHandlers,
  type SnapshotChunk,
  type StandbyMessage,
  type TlsFiles,
  type wire,
} from "@vgpu-ha/common";
import { Sender, SnapshotOutlet, type SnapshotStream } from "@vgpu-ha/primary";
import { testSenderOptions, testStandbyHello } from "@vgpu-ha/primary/testing";
import type { SnapshotPullPort } from "@vgpu-ha/standby";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  type GrpcServer,
  type PortOptions,
  replicationService,
  startGrpcServer,
} from "../servers.js";
import { FRAME, frameHead, HELLO_BYTES_MAX, PAGES_MAGIC } from "./snapshot-pull-frames.js";
import { pagesPullPort } from "./snapshot-pull-port.js";
import { servePagesSocket } from "./snapshot-pull-serve.js";
import { type PagesClient, pagesClient } from "./snapshot-pull-socket.js";

const MiB = 1024 ** 2;
const CHUNKS = 4;

const options = testSenderOptions({ snapshotWindowChunks: 8 });

const hello = (more: Partial<Extract<StandbyMessage, { kind: "hello" }>> = {}): StandbyMessage =>
  testStandbyHello({ empty: true, pullsSnapshots: true, snapshotId: 7, snapshotChunk: 1, ...more });

const pageOf = (index: number) => new Uint8Array(MiB).fill(index);

function chunks(): SnapshotStream {
  let index = 0;
  return {
    snapshotId: 7,
    atSeq: 0,
    next(): SnapshotChunk | undefined {
      if (index >= CHUNKS) return undefined;
      const i = index++;
      const pages = i === 0 ? [] : [{ context: 1, bo: 2, firstPage: i * 256, data: pageOf(i) }];
      return { snapshotId: 7, atSeq: 0, index: i, last: i === CHUNKS - 1, meta: undefined, pages };
    },
    release() {},
  };
}

/** A Sender sending snapshot 7 to a standby that pulls, every chunk produced; its outlet. */
function snapshotOutlet(): SnapshotOutlet {
  const sender = new Sender(options, new ReplicationLog(), chunks, 1);
  sender.connected(0);
  sender.poll(0);
  sender.step(hello({ snapshotId: 0, snapshotChunk: 0 }), 1);
  sender.poll(2);
  return new SnapshotOutlet(sender);
}

const dir = mkdtempSync(join(tmpdir(), "pages-socket-"));
const MAKE_CERTS = fileURLToPath(
  new URL("../../../../deploy/examples/make-certs.sh", import.meta.url),
);
function certs(sub: string, name: string): TlsFiles {
  execFileSync(MAKE_CERTS, [join(dir, sub), name], { stdio: "ignore" });
  const read = (f: string) => readFileSync(join(dir, sub, f));
  return { ca: read("ca.crt"), cert: read(`${name}.crt`), key: read(`${name}.key`), names: [name] };
}
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const servers: GrpcServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop(100)));
});

const noGrpc = {} as ServiceHandlers<typeof wire.Replication>;
const HELLO_TIMEOUT_MS = 300;

/** Sends `bytes` to a pages port raw; what came back and whether the port closed the socket. */
function rawExchange(
  address: string,
  bytes: Uint8Array,
): Promise<{ got: Buffer; closedMs: number }> {
  const [host, port] = [
    address.slice(0, address.lastIndexOf(":")),
    Number(address.slice(address.lastIndexOf(":") + 1)),
  ];
  const started = performance.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host, port }, () => socket.write(bytes));
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", () => undefined);
    socket.on("close", () =>
      resolve({ got: Buffer.concat(chunks), closedMs: performance.now() - started }),
    );
  });
}

async function primaryPort(
  port: PortOptions,
  outlet = snapshotOutlet(),
  onConnection: () => void = () => undefined,
): Promise<string> {
  const server = await startGrpcServer("127.0.0.1:0", 4 * MiB, replicationService(noGrpc), {
    ...port,
    pages: (socket) => {
      onConnection();
      servePagesSocket(
        socket,
        (request, stream) => {
          if (request instanceof Error) stream.fail(ErrorCode.MALFORMED, request.message);
          else outlet.open(stream, request);
        },
        HELLO_TIMEOUT_MS,
      );
    },
  });
  servers.push(server);
  return `127.0.0.1:${server.port}`;
}

interface Pulled {
  readonly got: PrimaryMessage[];
  readonly reason: string;
  readonly foreign: boolean;
}

function pull(
  address: string,
  request: StandbyMessage,
  tls?: { files: TlsFiles },
  onChunk: (m: PrimaryMessage) => void = () => undefined,
): Promise<Pulled> {
  const client = pagesClient({
    address,
    maxMessageBytes: 4 * MiB,
    ...(tls ? { tls: { files: tls.files, peerName: "a" } } : {}),
  });
  const got: PrimaryMessage[] = [];
  return new Promise((resolve) =>
    client.open(
      request,
      (m) => {
        got.push(m);
        onChunk(m);
      },
      (reason, foreign) => resolve({ got, reason, foreign }),
    ),
  );
}

function expectAllChunks(p: Pulled): void {
  expect(p.reason).toBe("");
  expect(p.got.map((m) => (m.kind === "snapshot" ? m.chunk.index : -1))).toEqual([1, 2, 3]);
  for (const m of p.got) {
    if (m.kind !== "snapshot") throw new Error("not a chunk");
    expect(m.chunk.pagesOwned).toBe(true);
    expect(Buffer.from(m.chunk.pages[0]!.data).equals(pageOf(m.chunk.index))).toBe(true);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A pull on `client` (made once: a connection made ahead belongs to it). */
function pullOn(client: PagesClient, request: StandbyMessage): Promise<Pulled> {
  const got: PrimaryMessage[] = [];
  return new Promise((resolve) =>
    client.open(
      request,
      (m) => got.push(m),
      (reason, foreign) => resolve({ got, reason, foreign }),
    ),
  );
}

describe("a pull over the pages socket", () => {
  it("takes the connection made ahead (preconnect) for the next pull", async () => {
    let connections = 0;
    const address = await primaryPort({}, snapshotOutlet(), () => connections++);
    const client = pagesClient({ address, maxMessageBytes: 4 * MiB });
    client.preconnect?.();
    client.preconnect?.(); // one waits at most
    await sleep(50);
    expect(connections).toBe(1);
    expectAllChunks(await pullOn(client, hello()));
    expect(connections).toBe(1);
  });

  it("makes again a connection the primary dropped for want of a hello", async () => {
    let connections = 0;
    const address = await primaryPort({}, snapshotOutlet(), () => connections++);
    const client = pagesClient({ address, maxMessageBytes: 4 * MiB });
    client.preconnect?.();
    await sleep(HELLO_TIMEOUT_MS + 200); // the primary closed it
    client.preconnect?.();
    await sleep(50);
    expect(connections).toBe(2);
    expectAllChunks(await pullOn(client, hello()));
    expect(connections).toBe(2);
  });

  it("delivers every chunk from the one asked, each its own buffer, then ends (plaintext)", async () => {
    expectAllChunks(await pull(await primaryPort({}), hello()));
  });

  it("reuses a chunk's receive buffer once given back, never one still held", async () => {
    const buffers = (p: Pulled) =>
      p.got.map((m) => (m.kind === "snapshot" ? m.chunk.pages[0]!.data.buffer : undefined));
    const held = await pull(await primaryPort({}), hello());
    expectAllChunks(held); // each still holds its own bytes
    expect(new Set(buffers(held)).size).toBe(3);
    const seen: number[] = [];
    const given = await pull(await primaryPort({}), hello(), undefined, (m) => {
      if (m.kind !== "snapshot") return;
      const data = m.chunk.pages[0]!.data;
      seen.push(data.every((x) => x === m.chunk.index) ? m.chunk.index : -1);
      m.chunk.pagesReturn!([data.buffer as ArrayBuffer]); // as the device, once written
    });
    expect(given.reason).toBe("");
    expect(seen).toEqual([1, 2, 3]); // each read whole before the next reused its buffer
    expect(new Set(buffers(given)).size).toBe(1);
  });

  it("refuses a hello of another cluster, peer, epoch or snapshot with PullSnapshot's codes", async () => {
    const address = await primaryPort({});
    const cases: [Partial<Extract<StandbyMessage, { kind: "hello" }>>, string][] = [
      [{ clusterId: "x" }, "WRONG_CLUSTER"],
      [{ nodeId: "z" }, "WRONG_PEER"],
      [{ epoch: 0 }, "STALE_EPOCH"],
      [{ snapshotId: 99 }, "SNAPSHOT_STALE"],
    ];
    for (const [more, code] of cases) {
      const p = await pull(address, hello(more));
      expect(p.got).toEqual([]);
      expect(p.reason.startsWith(`${code}: `)).toBe(true);
      expect(p.foreign).toBe(false);
    }
    expectAllChunks(await pull(address, hello())); // the port still serves
  });

  it("serves over mutual TLS and refuses a client certificate from another CA", async () => {
    const address = await primaryPort({
      tls: {
        files: certs("ca1", "a"),
        clientCertificates: "required",
        peerName: "b",
        onRefused: () => {},
      },
    });
    expectAllChunks(await pull(address, hello(), { files: certs("ca1", "b") }));
    const stranger = await pull(address, hello(), {
      files: { ...certs("ca2", "b"), ca: certs("ca1", "b").ca },
    });
    expect(stranger.got).toEqual([]);
    expect(stranger.reason).not.toBe("");
    expect(stranger.foreign).toBe(false);
  });

  it("tells an older primary (no pages socket) apart and pulls over gRPC instead", async () => {
    for (const tls of [false, true]) {
      const server = await startGrpcServer("127.0.0.1:0", 4 * MiB, replicationService(noGrpc), {
        ...(tls
          ? {
              tls: {
                files: certs("ca1", "a"),
                clientCertificates: "required" as const,
                onRefused: () => {},
              },
            }
          : {}),
      });
      servers.push(server);
      const address = `127.0.0.1:${server.port}`;
      const p = await pull(address, hello(), tls ? { files: certs("ca1", "b") } : undefined);
      expect(p.foreign).toBe(true);
      const opened: string[] = [];
      const grpc: SnapshotPullPort = {
        open: (_request, _deliver, done) => {
          opened.push("grpc");
          setImmediate(() => done(""));
          return () => {};
        },
      };
      const port = pagesPullPort(
        pagesClient({
          address,
          maxMessageBytes: MiB,
          ...(tls ? { tls: { files: certs("ca1", "b"), peerName: "a" } } : {}),
        }),
        grpc,
        () => 0,
      );
      const reason = await new Promise<string>((resolve) => port.open(hello(), () => {}, resolve));
      expect(reason).toBe("");
      await new Promise<string>((resolve) => port.open(hello(), () => {}, resolve));
      expect(opened).toEqual(["grpc", "grpc"]); // the second went straight to gRPC
    }
  });

  it("drops a standby whose hello is late, oversized or not a hello at all", async () => {
    const address = await primaryPort({});
    const silent = await rawExchange(address, PAGES_MAGIC);
    expect(silent.got.equals(Buffer.from(PAGES_MAGIC))).toBe(true); // the magic, then nothing
    expect(silent.closedMs).toBeGreaterThanOrEqual(HELLO_TIMEOUT_MS - 50);
    const huge = await rawExchange(
      address,
      Buffer.concat([PAGES_MAGIC, frameHead(FRAME.hello, HELLO_BYTES_MAX + 1)]),
    );
    expect(huge.got.equals(Buffer.from(PAGES_MAGIC))).toBe(true);
    expect(huge.closedMs).toBeLessThan(HELLO_TIMEOUT_MS);
    const chunkFirst = await rawExchange(
      address,
      Buffer.concat([PAGES_MAGIC, frameHead(FRAME.chunk, 4)]),
    );
    expect(chunkFirst.closedMs).toBeLessThan(HELLO_TIMEOUT_MS);
    expectAllChunks(await pull(address, hello())); // the port still serves
  });

  it("ends a pull whose connection is cut in the middle of a frame", async () => {
    const cut = createServer((socket: Socket) => {
      socket.once("data", () => {
        socket.write(Buffer.concat([PAGES_MAGIC, frameHead(FRAME.accepted, 0)]));
        socket.write(frameHead(FRAME.chunk, 1000));
        socket.end(new Uint8Array(400)); // 400 of its 1000 bytes, then the connection ends
      });
    });
    await new Promise<void>((r) => cut.listen(0, "127.0.0.1", r));
    try {
      const address = `127.0.0.1:${(cut.address() as { port: number }).port}`;
      const p = await pull(address, hello());
      expect(p.got).toEqual([]);
      expect(p.reason).toBe("connection closed mid-pull");
    } finally {
      cut.close();
    }
  });
});
