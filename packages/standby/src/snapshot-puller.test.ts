// Proves when the standby pulls a snapshot's pages: only while a snapshot is in progress (its
// chunk 0 came on the stream), once per snapshot, from the chunk the receiver needs next; a
// pull that ended is opened again no sooner than PULL_RETRY_MS, from where the receiver got
// to; a newer snapshot replaces the pull of an older one; close() cancels the pull in progress;
// the port is warmed once, at the first look, and released by stop(); while the standby holds
// no replica and pulls nothing the port is asked to connect ahead, never while it holds one or
// pulls; a chunk 0 that starts a new snapshot has its pull opened before it is stepped (the
// request the step would make), kept by the check after the step, closed if the step started
// nothing, and none is opened early for a chunk 0 already seen or any other message.
import type { PrimaryMessage, StandbyMessage } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { Receiver } from "./core/receiver.js";
import { PULL_RETRY_MS, SnapshotPuller, type SnapshotPullPort } from "./snapshot-puller.js";
import { testBackendOptions } from "./testing/backend-options.js";

const PAGE = 4096;

interface Opened {
  readonly request: Extract<StandbyMessage, { kind: "hello" }>;
  readonly deliver: (m: PrimaryMessage) => void;
  readonly done: (reason: string) => void;
  cancelled: boolean;
}

function setup() {
  const receiver = new Receiver(
    { clusterId: "c", nodeId: "b", backendOptions: testBackendOptions(), pullsSnapshots: true },
    1,
  );
  const opened: Opened[] = [];
  const calls = { warm: 0, close: 0, preconnect: 0 };
  const port: SnapshotPullPort = {
    warm() {
      calls.warm++;
    },
    close() {
      calls.close++;
    },
    preconnect() {
      calls.preconnect++;
    },
    open(request, deliver, done) {
      const o: Opened = { request: request as Opened["request"], deliver, done, cancelled: false };
      opened.push(o);
      return () => {
        o.cancelled = true;
      };
    },
  };
  let now = 0;
  const delivered: PrimaryMessage[] = [];
  const puller = new SnapshotPuller({
    port,
    receiver,
    now: () => now,
    deliver: (m) => {
      delivered.push(m);
      receiver.step(m);
    },
    logger: { info() {}, warn() {} },
  });
  const advance = (ms: number) => {
    now += ms;
  };
  return { receiver, opened, puller, delivered, advance, calls };
}

/** The chunks of a snapshot holding one 4-page buffer: chunk 0 (metadata), then a page each. */
function chunks(snapshotId: number) {
  const meta = {
    nextContextHandle: 2,
    contexts: [
      {
        handle: 1,
        tenant: "t",
        sessionId: "s",
        nextBoHandle: 2,
        fenceValue: 0,
        bos: [{ handle: 1, sizeBytes: 4 * PAGE, mapped: false }],
      },
    ],
    sessions: [{ sessionId: "s", tenant: "t", lastFrame: 0, replies: [] }],
  };
  const chunk = (index: number) => ({
    snapshotId,
    atSeq: 0,
    index,
    last: index === 4,
    meta: index === 0 ? meta : undefined,
    pages:
      index === 0
        ? []
        : [{ context: 1, bo: 1, firstPage: index - 1, data: new Uint8Array(PAGE).fill(index) }],
  });
  return [0, 1, 2, 3, 4].map((i) => ({ kind: "snapshot", epoch: 1, chunk: chunk(i) }) as const);
}

describe("the snapshot puller", () => {
  it("pulls only while a snapshot is in progress, once, from the chunk needed next", () => {
    const { receiver, opened, puller, calls } = setup();
    puller.check();
    expect(opened).toHaveLength(0);
    expect(calls.warm).toBe(1); // connected before any snapshot
    const [first, ...rest] = chunks(5);
    receiver.step(first!);
    puller.check();
    puller.check();
    expect(opened).toHaveLength(1);
    expect(opened[0]!.request).toMatchObject({
      snapshotId: 5,
      snapshotChunk: 1,
      pullsSnapshots: true,
    });
    for (const m of rest) opened[0]!.deliver(m);
    opened[0]!.done("");
    expect(receiver.state).toBe("replica");
    puller.check();
    expect(opened).toHaveLength(1);
    expect(calls.warm).toBe(1);
  });

  it("reopens an ended pull after PULL_RETRY_MS from where the receiver got to", () => {
    const { receiver, opened, puller, advance } = setup();
    const all = chunks(5);
    receiver.step(all[0]!);
    puller.check();
    opened[0]!.deliver(all[1]!);
    opened[0]!.done("connection reset");
    advance(PULL_RETRY_MS - 1);
    puller.check();
    expect(opened).toHaveLength(1);
    advance(1);
    puller.check();
    expect(opened).toHaveLength(2);
    expect(opened[1]!.request).toMatchObject({ snapshotId: 5, snapshotChunk: 2 });
  });

  it("a newer snapshot replaces the pull of an older one; close() cancels", () => {
    const { receiver, opened, puller } = setup();
    receiver.step(chunks(5)[0]!);
    puller.check();
    receiver.step(chunks(6)[0]!);
    puller.check();
    expect(opened.map((o) => [o.request.snapshotId, o.cancelled])).toEqual([
      [5, true],
      [6, false],
    ]);
    puller.close();
    expect(opened[1]!.cancelled).toBe(true);
  });

  it("stop() ends the pull in progress and releases the port", () => {
    const { receiver, opened, puller, calls } = setup();
    receiver.step(chunks(5)[0]!);
    puller.check();
    expect(calls.close).toBe(0);
    puller.stop();
    expect(opened[0]!.cancelled).toBe(true);
    expect(calls.close).toBe(1);
  });

  it("asks the port to connect ahead only while it holds no replica and pulls nothing", () => {
    const { receiver, opened, puller, calls } = setup();
    puller.check(); // fresh: a snapshot will come
    expect(calls.preconnect).toBe(1);
    const [first, ...rest] = chunks(5);
    receiver.step(first!);
    puller.check(); // pulling now
    expect(calls.preconnect).toBe(1);
    for (const m of rest) opened[0]!.deliver(m);
    opened[0]!.done("");
    puller.check(); // a replica: nothing expected
    expect(receiver.state).toBe("replica");
    expect(calls.preconnect).toBe(1);
  });

  it("opens a new snapshot's pull before its chunk 0 is stepped, as the step would", () => {
    const { receiver, opened, puller } = setup();
    const [first, ...rest] = chunks(5);
    puller.beforeStep(first!);
    expect(opened).toHaveLength(1);
    const early = opened[0]!.request;
    receiver.step(first!);
    expect(early).toEqual(receiver.pullRequest()); // the very request the step makes
    puller.check();
    expect(opened).toHaveLength(1);
    expect(opened[0]!.cancelled).toBe(false);
    for (const m of rest) opened[0]!.deliver(m);
    expect(receiver.state).toBe("replica");
    // The same chunk 0 again (a resent copy) opens nothing; nor does another message.
    puller.beforeStep(first!);
    puller.beforeStep(rest[0]!);
    puller.beforeStep({ kind: "heartbeat", epoch: 1, sentUs: 1, lastSeq: 0, syncReplica: false });
    expect(opened).toHaveLength(1);
  });

  it("closes an early pull whose chunk 0 started nothing", () => {
    const { receiver, opened, puller } = setup();
    receiver.raiseEpoch(3);
    puller.beforeStep({ ...chunks(5)[0]!, epoch: 2 });
    expect(opened).toHaveLength(0); // an older epoch: the step would refuse it
    // A chunk 0 whose metadata the step refuses (a context of no session).
    const bad = chunks(6)[0]!;
    const refused = {
      ...bad,
      epoch: 3,
      chunk: { ...bad.chunk, meta: { ...bad.chunk.meta!, sessions: [] } },
    };
    puller.beforeStep(refused);
    expect(opened).toHaveLength(1);
    receiver.step(refused);
    expect(receiver.pullRequest()).toBeUndefined();
    puller.check();
    expect(opened[0]!.cancelled).toBe(true);
  });
});
