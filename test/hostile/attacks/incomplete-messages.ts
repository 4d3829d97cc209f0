// Incomplete gRPC messages on the guest port, for the harness: streams that never send Open,
// each announcing a 64 MiB message and sending only part of it, held for a while
// (test/support/incomplete-messages.ts does the sending). The node must reset them
// (guest.maxIncompleteBytesBeforeOpen) rather than hold what they sent; the harness judges its
// resident memory, the refusals counted and logged.
import {
  ATTACKER_SESSION_MEMORY_MB,
  incompleteMessages,
} from "../../support/incomplete-messages.js";
import { connectH2 } from "./h2-connect.js";
import { type AttackerTls, type AttackOutcome, sleep } from "./outcome.js";

export interface IncompleteMessagesSpec {
  readonly target: string;
  readonly streams: number;
  readonly connections: number;
  /** What each stream sends of its 64 MiB message. */
  readonly sendBytes: number;
  readonly holdMs: number;
  readonly tls?: AttackerTls;
}

export async function incompleteMessagesAttack(
  spec: IncompleteMessagesSpec,
): Promise<AttackOutcome> {
  const attack = await incompleteMessages({
    target: spec.target,
    streams: spec.streams,
    connections: spec.connections,
    announceBytes: 64 * 1024 ** 2,
    sendBytes: spec.sendBytes,
    connect: () => connectH2(spec.target, spec.tls, ATTACKER_SESSION_MEMORY_MB),
  });
  await sleep(spec.holdMs);
  attack.close();
  const r = attack.result;
  const MiB = 1024 ** 2;
  return {
    sent: { streams: r.streams, "MiB of incomplete messages": (r.streams * spec.sendBytes) / MiB },
    answers: {
      ...Object.fromEntries(Object.entries(r.resets).map(([k, v]) => [`reset ${k}`, v])),
      ...Object.fromEntries(Object.entries(r.statuses).map(([k, v]) => [`grpc-status ${k}`, v])),
      "still open, all sent": r.streamsHolding,
    },
    note: `${r.streams} streams sent ${spec.sendBytes / MiB} MiB each of a 64 MiB message and no Open; ${r.resets.ENHANCE_YOUR_CALM ?? 0} reset with ENHANCE_YOUR_CALM, ${r.streamsHolding} held all they sent`,
  };
}
