// Small Sender options for the sender's tests; override what a test is about.
import { REPLICATION_PROTOCOL_VERSION, type StandbyMessage } from "@vgpu-ha/common";
import type { SenderOptions } from "../core/sender.js";

export function testSenderOptions(overrides: Partial<SenderOptions> = {}): SenderOptions {
  return {
    clusterId: "c",
    nodeId: "a",
    peerName: "b",
    maxBatchEntries: 16,
    maxBatchBytes: 65536,
    maxInflightEntries: 64,
    maxInflightBytes: 1 << 20,
    snapshotWindowChunks: 4,
    heartbeatMs: 100,
    retransmitMs: 200,
    retainBytes: 1 << 20,
    ...overrides,
  };
}

/**
 * The standby's hello for testSenderOptions' pair (peer "b" of cluster "c", this build's
 * protocol); override a field.
 */
export function testStandbyHello(
  overrides: Partial<Extract<StandbyMessage, { kind: "hello" }>> = {},
): StandbyMessage {
  return {
    kind: "hello",
    epoch: 1,
    clusterId: "c",
    nodeId: "b",
    empty: false,
    lastAppliedSeq: 0,
    snapshotId: 0,
    snapshotChunk: 0,
    protocolVersion: REPLICATION_PROTOCOL_VERSION,
    ...overrides,
  };
}

/** The standby's ack of a snapshot's first `chunks` chunks (snapshot 1, epoch 1). */
export function testSnapshotAck(chunks: number): StandbyMessage {
  return {
    kind: "ack",
    epoch: 1,
    receivedSeq: 0,
    appliedSeq: 0,
    snapshotId: 1,
    snapshotChunk: chunks,
    heartbeatSentUs: 0,
    checkpoints: [],
  };
}
