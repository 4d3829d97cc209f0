// Proves a standby refuses a replication peer that is not its primary — an older epoch,
// another cluster, a forged node id (its own, or not peer.name, tls or not), a stream without a
// hello — with a typed error and no state change, and that entries out of order are never
// applied: shuffled and repeated batches from a real primary's log leave the replica exactly
// where in-order delivery takes it.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  decodeStandbyMessage,
  type Entry,
  ErrorCode,
  encodePrimaryMessage,
  ReplicationLog,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import { Backend, computeDigest } from "@vgpu-ha/gpu-model";
import { backendOptionsFor, generateWorkload } from "@vgpu-ha/gpu-model/testing";
import { Sequencer } from "@vgpu-ha/primary";
import { Receiver } from "@vgpu-ha/standby";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FakeCall, helloOf, standbyFixture } from "./targets.js";

/** What the standby wrote back, decoded. */
const replies = (call: FakeCall): StandbyMessage[] =>
  call.written.map((w) => {
    const m = decodeStandbyMessage(fromBinary(wire.StandbyMessageSchema, toBytes(w)));
    if (m instanceof Error) throw m;
    return m;
  });
/** Through bytes, as the primary would receive it. */
const toBytes = (w: wire.StandbyMessage) => toBinary(wire.StandbyMessageSchema, w);

describe("a replication peer that is not the standby's primary", () => {
  it.each([
    [
      "another cluster (of a higher epoch)",
      helloOf("other", "primary", 9),
      ErrorCode.WRONG_CLUSTER,
      /cluster "other" is not/,
    ],
    [
      "the right cluster and another node id than peer.name (no tls)",
      helloOf("fuzz", "node-x", 1001),
      ErrorCode.WRONG_PEER,
      /node "node-x" is not this node's peer "primary"/,
    ],
    ["the standby's own node id", helloOf("fuzz", "standby", 9), ErrorCode.WRONG_PEER, /own id/],
    [
      "entries without a hello",
      encodePrimaryMessage({
        kind: "heartbeat",
        epoch: 9,
        sentUs: 1,
        lastSeq: 9,
        syncReplica: true,
      }),
      ErrorCode.WRONG_PEER,
      /must start with a hello/,
    ],
  ] as const)("is refused, and learns not even our epoch: %s", (_, first, code, message) => {
    const { link, view } = standbyFixture();
    const before = view();
    const call = new FakeCall();
    link.accept(call as never);
    call.emit("data", first);
    call.emit(
      "data",
      encodePrimaryMessage({
        kind: "heartbeat",
        epoch: 9,
        sentUs: 1,
        lastSeq: 9,
        syncReplica: true,
      }),
    );
    const [reply, ...rest] = replies(call);
    expect(reply).toMatchObject({ kind: "error", code, epoch: 0 });
    expect((reply as { message: string }).message).toMatch(message);
    expect(rest).toEqual([]); // nothing after the refusal: the stream is closed
    expect(call.ended).toBe(true);
    expect(link.connected).toBe(false);
    expect(link.refusedStreams).toBe(1);
    expect(view()).toEqual(before);
  });

  it("its own peer at an older epoch gets our hello (so it can step down), then the refusal", () => {
    const { link, view } = standbyFixture();
    const before = view();
    const call = new FakeCall();
    link.accept(call as never);
    call.emit("data", helloOf("fuzz", "primary", 4));
    const [hello, error, ...rest] = replies(call);
    expect(hello).toMatchObject({ kind: "hello", epoch: 5, clusterId: "fuzz", nodeId: "standby" });
    expect(error).toMatchObject({ kind: "error", code: ErrorCode.STALE_EPOCH, epoch: 5 });
    expect((error as { message: string }).message).toMatch(/epoch 4 is older than 5/);
    expect(rest).toEqual([]);
    expect(call.ended).toBe(true);
    expect(view()).toEqual(before);
  });

  it("a hello naming another node than peer.name is refused; peer.name's is taken", () => {
    const { link, view } = standbyFixture("node-p");
    const before = view();
    const forged = new FakeCall();
    link.accept(forged as never);
    forged.emit("data", helloOf("fuzz", "node-x", 9));
    expect(replies(forged)[0]).toMatchObject({ kind: "error", code: ErrorCode.WRONG_PEER });
    expect(view()).toEqual(before);
    const real = new FakeCall();
    link.accept(real as never);
    real.emit("data", helloOf("fuzz", "node-p", 9));
    expect(link.connected).toBe(true);
    expect(replies(real)[0]).toMatchObject({ kind: "hello", nodeId: "standby" });
  });
});

/** A real primary's log of a random workload, and the replica state in-order delivery gives. */
function primaryLog(seed: number) {
  const workload = generateWorkload(seed, { frames: 60, sessions: 2, tenants: 2 });
  const options = backendOptionsFor(workload, 3);
  const backend = new Backend(options);
  const log = new ReplicationLog();
  const sequencer = new Sequencer(backend, log, { mmio: "per-page", flushBytes: 1 << 20 }, () => 0);
  const records = new Map(
    workload.sessions.map((s) => [s.id, sequencer.openSession(s.id, s.tenant)]),
  );
  for (const step of workload.steps) {
    const r = records.get(step.session)!;
    if ("code" in r) throw new Error(r.message);
    sequencer.applyFrame(r, step.frame);
  }
  sequencer.flushMmio();
  const entries = log.read(1, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  return {
    options: { ...options, device: { ...options.device, seed: 0xbeef } },
    entries,
    primary: backend,
  };
}

function replicaOf(options: ReturnType<typeof primaryLog>["options"]) {
  const receiver = new Receiver(
    { clusterId: "fuzz", nodeId: "standby", backendOptions: options },
    1,
  );
  receiver.adopt(new Backend(options), 0);
  return receiver;
}

describe("entries out of order", () => {
  it("are never applied: shuffled, repeated batches end where in-order delivery does", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 0x7fffffff }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 8 })), {
          minLength: 1,
          maxLength: 30,
        }),
        (seed, batches) => {
          const { options, entries, primary } = primaryLog(seed);
          const receiver = replicaOf(options);
          // Arbitrary slices of the log, in any order, repeated: a gap asks for a resend and
          // is never applied; what was applied is always a prefix of the log.
          for (const [at, n] of batches) {
            const from = at % entries.length;
            const batch: Entry[] = entries.slice(from, from + n);
            const out = receiver.step({ kind: "entries", epoch: 1, entries: batch });
            expect(receiver.state).toBe("replica");
            const gap = out.find((m) => m.kind === "resync");
            if (gap) expect(gap).toMatchObject({ reason: "gap", fromSeq: receiver.appliedSeq + 1 });
          }
          const applied = receiver.appliedSeq;
          // Then the whole log in order: the replica equals the primary.
          receiver.step({ kind: "entries", epoch: 1, entries });
          expect(receiver.appliedSeq).toBe(entries.length);
          expect(applied).toBeLessThanOrEqual(entries.length);
          expect(computeDigest(receiver.backend!)).toEqual(computeDigest(primary));
        },
      ),
      { numRuns: 60 },
    );
  });

  it("a batch starting past the next seq changes nothing and asks once for the missing ones", () => {
    const { options, entries } = primaryLog(7);
    const receiver = replicaOf(options);
    receiver.step({ kind: "entries", epoch: 1, entries: entries.slice(0, 3) });
    const before = computeDigest(receiver.backend!);
    const first = receiver.step({ kind: "entries", epoch: 1, entries: entries.slice(5, 9) });
    expect(first.map((m) => m.kind)).toEqual(["ack", "resync"]);
    expect(first[1]).toMatchObject({ reason: "gap", fromSeq: 4 });
    const again = receiver.step({ kind: "entries", epoch: 1, entries: entries.slice(6, 9) });
    expect(again.map((m) => m.kind)).toEqual(["ack"]);
    expect(receiver.appliedSeq).toBe(3);
    expect(computeDigest(receiver.backend!)).toEqual(before);
  });
});
