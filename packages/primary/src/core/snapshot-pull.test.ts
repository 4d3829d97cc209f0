// Proves which snapshot pulls a primary serves (decidePull) and what the outlet writes on one:
// only its peer of its cluster at its epoch, for the snapshot being sent now from a chunk it
// still holds (else SNAPSHOT_STALE); chunks produced before the pull opened are written when it
// opens, each chunk once per pull (the Sender's resends are not repeated on a reliable stream),
// a reopened pull starts where the standby asks, the last chunk ends the stream, and a pull
// whose snapshot is over is ended. Driven by a real Sender over a fake snapshot stream.
import {
  ErrorCode,
  type PrimaryMessage,
  ReplicationLog,
  type SnapshotChunk,
} from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { type PullStream, SnapshotOutlet } from "../snapshot-outlet.js";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender, type SnapshotStream } from "./sender.js";
import { decidePull } from "./snapshot-pull.js";

const CHUNKS = 6;
const options = testSenderOptions({ snapshotWindowChunks: 3, retransmitMs: 100 });

function fakeStream(snapshotId: number): SnapshotStream {
  let index = 0;
  return {
    snapshotId,
    atSeq: 0,
    next(): SnapshotChunk | undefined {
      if (index >= CHUNKS) return undefined;
      const i = index++;
      return { snapshotId, atSeq: 0, index: i, last: i === CHUNKS - 1, meta: undefined, pages: [] };
    },
    release() {},
  };
}

/** A Sender that began snapshot 7 for a standby that pulls, with its first window produced. */
function snapshotting(): { sender: Sender; sent: PrimaryMessage[] } {
  let id = 7;
  const sender = new Sender(options, new ReplicationLog(), () => fakeStream(id++), 1);
  sender.connected(0);
  sender.poll(0);
  sender.step(testStandbyHello({ empty: true, pullsSnapshots: true }), 1);
  return { sender, sent: sender.poll(2) };
}

const pullOf = (snapshotId: number, from: number, more = {}) =>
  testStandbyHello({ empty: true, pullsSnapshots: true, snapshotId, snapshotChunk: from, ...more });

const ack = (chunks: number, snapshotId = 7) =>
  ({
    kind: "ack",
    epoch: 1,
    receivedSeq: 0,
    appliedSeq: 0,
    snapshotId,
    snapshotChunk: chunks,
    heartbeatSentUs: 0,
    checkpoints: [],
  }) as const;

class FakePull implements PullStream {
  readonly written: number[] = [];
  ended = false;
  failed: ErrorCode | undefined;
  private readonly closers: (() => void)[] = [];
  write(m: PrimaryMessage): boolean {
    if (m.kind === "snapshot") this.written.push(m.chunk.index);
    return true;
  }
  end(): void {
    this.ended = true;
    for (const c of this.closers) c();
  }
  fail(code: ErrorCode): void {
    this.failed = code;
  }
  onClose(handler: () => void): void {
    this.closers.push(handler);
  }
}

describe("decidePull", () => {
  it("serves the snapshot being sent from a chunk still held, with what was produced", () => {
    const { sender, sent } = snapshotting();
    expect(sender.peerPullsSnapshots).toBe(true);
    expect(sent.filter((m) => m.kind === "snapshot")).toHaveLength(3);
    const d = decidePull(sender, pullOf(7, 1));
    expect(d).toMatchObject({ kind: "serve", snapshotId: 7 });
    expect(d.kind === "serve" && d.chunks.map((c) => c.index)).toEqual([1, 2]);
  });

  it.each([
    ["not a hello", { ...ack(0), epoch: 1 }, ErrorCode.MALFORMED],
    ["another cluster", pullOf(7, 1, { clusterId: "x" }), ErrorCode.WRONG_CLUSTER],
    ["another node", pullOf(7, 1, { nodeId: "z" }), ErrorCode.WRONG_PEER],
    ["an older epoch", pullOf(7, 1, { epoch: 0 }), ErrorCode.STALE_EPOCH],
    ["a newer epoch", pullOf(7, 1, { epoch: 2 }), ErrorCode.STALE_EPOCH],
    ["an older snapshot", pullOf(6, 1), ErrorCode.SNAPSHOT_STALE],
    ["a chunk not produced yet", pullOf(7, 4), ErrorCode.SNAPSHOT_STALE],
  ] as const)("refuses %s", (_, request, code) => {
    const { sender } = snapshotting();
    expect(decidePull(sender, request)).toMatchObject({ kind: "refuse", code });
  });

  it("refuses a chunk the standby acknowledged already, and any pull once streaming", () => {
    const { sender } = snapshotting();
    sender.step(ack(2), 3);
    expect(decidePull(sender, pullOf(7, 1))).toMatchObject({ code: ErrorCode.SNAPSHOT_STALE });
    expect(decidePull(sender, pullOf(7, 2))).toMatchObject({ kind: "serve" });
    sender.poll(4);
    sender.step(ack(5), 5);
    sender.poll(6);
    sender.step(ack(CHUNKS), 7);
    expect(sender.state).toBe("streaming");
    expect(decidePull(sender, pullOf(7, CHUNKS))).toMatchObject({
      code: ErrorCode.SNAPSHOT_STALE,
    });
  });
});

describe("the snapshot outlet", () => {
  /** Routes the Sender's output as the PeerLinkShell does; returns what stayed on the stream. */
  const route = (sender: Sender, outlet: SnapshotOutlet, now: number) => {
    const stream: number[] = [];
    for (const m of sender.poll(now)) {
      if (m.kind !== "snapshot") continue;
      if (m.chunk.index > 0 && outlet.active) outlet.send(m);
      else stream.push(m.chunk.index);
    }
    outlet.sweep();
    return stream;
  };

  it("writes what was held when the pull opens, each chunk once, and ends after the last", () => {
    const { sender } = snapshotting();
    const outlet = new SnapshotOutlet(sender);
    const pull = new FakePull();
    outlet.open(pull, pullOf(7, 1));
    expect(pull.written).toEqual([1, 2]);
    // No ack for longer than retransmitMs: the Sender resends its window; the pull has it.
    expect(route(sender, outlet, 500)).toEqual([0]);
    expect(pull.written).toEqual([1, 2]);
    sender.step(ack(3), 501);
    route(sender, outlet, 502);
    expect(pull.written).toEqual([1, 2, 3, 4, 5]);
    expect(pull.ended).toBe(true);
  });

  it("a reopened pull starts where the standby asks; a refused one is failed", () => {
    const { sender } = snapshotting();
    const outlet = new SnapshotOutlet(sender);
    const first = new FakePull();
    outlet.open(first, pullOf(7, 1));
    sender.step(ack(2), 3);
    const again = new FakePull();
    outlet.open(again, pullOf(7, 2));
    expect(first.ended).toBe(true);
    expect(again.written).toEqual([2]);
    const stale = new FakePull();
    outlet.open(stale, pullOf(7, 1));
    expect(stale.failed).toBe(ErrorCode.SNAPSHOT_STALE);
    expect(again.ended).toBe(false);
  });

  it("ends a pull whose snapshot was replaced", () => {
    const { sender } = snapshotting();
    const outlet = new SnapshotOutlet(sender);
    const pull = new FakePull();
    outlet.open(pull, pullOf(7, 1));
    sender.step({ kind: "resync", epoch: 1, reason: "diverged", fromSeq: 0, detail: "" }, 3);
    expect(sender.snapshotProgress?.snapshotId).toBe(8);
    route(sender, outlet, 4);
    expect(pull.ended).toBe(true);
  });
});
