// Proves when a pulled chunk's pages are marked as its own (withOwnedPages): only when they all
// view one ArrayBuffer larger than Node's shared pool and with no room for more than this
// message (grpc-js's receive buffer of one message); pages in a pooled or shared buffer, in
// several buffers, or in a buffer holding more, are left to be copied; that chunks pulled over
// a real grpc-js loopback call arrive so marked, byte for byte (grpc-js does give each message
// a buffer of its own), on a client warmed first and kept for a second pull; and the pull's
// receive window is twice the chunks in flight, within
// HTTP/2's bounds.
import * as grpc from "@grpc/grpc-js";
import {
  addService,
  type PrimaryMessage,
  type ServiceHandlers,
  type SnapshotPages,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";
import {
  grpcPullPort,
  pullStreamOf,
  pullWindowBytes,
  withOwnedPages,
} from "./snapshot-pull-grpc.js";

const MiB = 2 ** 20;

function pulled(pages: SnapshotPages[]): PrimaryMessage {
  const chunk = { snapshotId: 1, atSeq: 5, index: 2, last: false, meta: undefined, pages };
  return { kind: "snapshot", epoch: 3, chunk };
}

const owned = (m: PrimaryMessage) => m.kind === "snapshot" && m.chunk.pagesOwned === true;

/** Pages of `sizes` bytes laid one after another in one buffer with `extra` bytes more. */
function inOneBuffer(sizes: number[], extra: number, shared = false): SnapshotPages[] {
  const total = sizes.reduce((a, b) => a + b, 0) + extra;
  const buffer = shared ? new SharedArrayBuffer(total) : new ArrayBuffer(total);
  let at = extra;
  return sizes.map((n, i) => {
    const data = new Uint8Array(buffer, at, n);
    at += n;
    return { context: 1, bo: 1, firstPage: i * 64, data };
  });
}

describe("withOwnedPages", () => {
  it("marks pages in a receive buffer of their own", () => {
    expect(owned(withOwnedPages(pulled(inOneBuffer([MiB], 40))))).toBe(true);
    expect(owned(withOwnedPages(pulled(inOneBuffer([4096, 8192, 65536], 120))))).toBe(true);
  });

  it("leaves pages to be copied when the buffer may hold something else", () => {
    expect(owned(withOwnedPages(pulled(inOneBuffer([MiB], 4096))))).toBe(false); // room for more
    expect(owned(withOwnedPages(pulled(inOneBuffer([4096], 16))))).toBe(false); // pool-sized
    expect(owned(withOwnedPages(pulled(inOneBuffer([MiB], 40, true))))).toBe(false); // shared
    const two = [...inOneBuffer([MiB], 40), ...inOneBuffer([MiB], 40)];
    expect(owned(withOwnedPages(pulled(two)))).toBe(false);
    expect(owned(withOwnedPages(pulled([])))).toBe(false);
  });

  it("leaves other messages as they are", () => {
    const m: PrimaryMessage = {
      kind: "heartbeat",
      epoch: 1,
      sentUs: 1,
      lastSeq: 1,
      syncReplica: false,
      maintenancePaused: false,
    };
    expect(withOwnedPages(m)).toBe(m);
  });
});

describe("a pull over grpc-js", () => {
  it("delivers each pulled chunk with its pages as its own", async () => {
    const sent = [1, 2, 3].map((index) => {
      const data = new Uint8Array(MiB).fill(index);
      return {
        snapshotId: 7,
        atSeq: 9,
        index,
        last: index === 3,
        meta: undefined,
        pages: [{ context: 1, bo: 2, firstPage: index * 256, data }],
      };
    });
    const server = new grpc.Server();
    const handlers = {
      pullSnapshot: (call: grpc.ServerWritableStream<wire.StandbyMessage, wire.PrimaryMessage>) => {
        const { stream } = pullStreamOf(call);
        for (const chunk of sent) stream.write({ kind: "snapshot", epoch: 4, chunk });
        stream.end();
      },
    } as unknown as ServiceHandlers<typeof wire.Replication>;
    addService(server, wire.Replication, handlers);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    try {
      const pull = grpcPullPort({
        address: `127.0.0.1:${port}`,
        maxMessageBytes: 4 * MiB,
        windowBytes: 16 * MiB,
      });
      const got: PrimaryMessage[] = [];
      const request: StandbyMessage = {
        kind: "hello",
        epoch: 4,
        clusterId: "c",
        nodeId: "b",
        empty: true,
        lastAppliedSeq: 0,
        snapshotId: 7,
        snapshotChunk: 1,
      };
      pull.warm?.();
      const reason = await new Promise<string>((resolve) =>
        pull.open(request, (m) => got.push(m), resolve),
      );
      expect(reason).toBe("");
      // The same client serves the next pull (it is kept for the role's life)
      const again: PrimaryMessage[] = [];
      await new Promise<string>((resolve) => pull.open(request, (m) => again.push(m), resolve));
      expect(again).toHaveLength(3);
      pull.close?.();
      expect(got.map(owned)).toEqual([true, true, true]);
      got.forEach((m, i) => {
        if (m.kind !== "snapshot") throw new Error("not a chunk");
        expect(m.chunk.index).toBe(i + 1);
        expect(Buffer.from(m.chunk.pages[0]!.data).equals(sent[i]!.pages[0]!.data)).toBe(true);
      });
    } finally {
      server.forceShutdown();
    }
  });
});

describe("pullWindowBytes", () => {
  it("is twice the chunks in flight, at least 16 MiB, at most 2^31 - 1", () => {
    expect(pullWindowBytes(MiB, 16)).toBe(32 * MiB);
    expect(pullWindowBytes(MiB, 2)).toBe(16 * MiB);
    expect(pullWindowBytes(64 * MiB, 64)).toBe(2 ** 31 - 1);
  });
});
