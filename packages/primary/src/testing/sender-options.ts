// Small Sender options for the sender's tests; override what a test is about.
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
