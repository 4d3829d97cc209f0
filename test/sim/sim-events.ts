// What can happen in a simulated run, and how each event reads in a --trace.
import type { PrimaryMessage, StandbyMessage } from "@vgpu-ha/common";

export type SimEvent =
  | { readonly kind: "issue" }
  | { readonly kind: "flush" }
  | { readonly kind: "tick" }
  | { readonly kind: "checkpoint" }
  | { readonly kind: "toStandby"; readonly connection: number; readonly message: PrimaryMessage }
  | { readonly kind: "toPrimary"; readonly connection: number; readonly message: StandbyMessage }
  | { readonly kind: "disconnect" }
  | { readonly kind: "reconnect" }
  | { readonly kind: "standbyStart" }
  | { readonly kind: "standbyRestart" }
  /** A simulated device completes a piece of work (sim-device.ts). */
  | { readonly kind: "device"; readonly node: "primary" | "standby"; readonly complete: () => void }
  /** Would the standby take over now (its lease watch finding the primary gone)? */
  | { readonly kind: "promotionProbe" };

export function describeEvent(event: SimEvent): string {
  if (event.kind === "toStandby" || event.kind === "toPrimary") {
    return `${event.kind}#${event.connection} ${describeMessage(event.message)}`;
  }
  if (event.kind === "device") return `device ${event.node}`;
  return event.kind;
}

function describeMessage(m: PrimaryMessage | StandbyMessage): string {
  switch (m.kind) {
    case "entries":
      return `entries ${m.entries[0]?.seq}..${m.entries.at(-1)?.seq} late ${m.lateResults?.length ?? 0}`;
    case "snapshot":
      return `snapshot ${m.chunk.snapshotId}/${m.chunk.index}${m.chunk.last ? " last" : ""} at ${m.chunk.atSeq}`;
    case "heartbeat":
      return `heartbeat lastSeq ${m.lastSeq}`;
    case "ack":
      return `ack received ${m.receivedSeq} applied ${m.appliedSeq} snapshot ${m.snapshotId}/${m.snapshotChunk}`;
    case "resync":
      return `resync ${m.reason} from ${m.fromSeq}`;
    case "hello":
      return "empty" in m
        ? `hello empty=${m.empty} applied ${m.lastAppliedSeq} snapshot ${m.snapshotId}/${m.snapshotChunk}`
        : `hello ${m.firstRetainedSeq}..${m.lastSeq}`;
    case "error":
      return `error ${m.code} ${m.message}`;
    case "handover":
      return `handover at ${m.lastSeq}`;
  }
}
