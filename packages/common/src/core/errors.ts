// The one catalogue of operating errors: a stable code (from proto), its name, whether a client
// may retry it, and a description. Programmer errors use invariant(). No transport here: the
// gRPC status of each code is the edge's (../errors.ts), so the core loads without grpc-js.
import { ErrorCode } from "../gen/vgpu/v1/types_pb.js";

export { ErrorCode };

export interface ErrorInfo {
  readonly name: string;
  readonly retryable: boolean;
  readonly description: string;
}

const info = (name: string, retryable: boolean, description: string): ErrorInfo => ({
  name,
  retryable,
  description,
});

export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, ErrorInfo>> = {
  [ErrorCode.OK]: info("OK", false, "success"),
  [ErrorCode.UNKNOWN_CONTEXT]: info("UNKNOWN_CONTEXT", false, "no such context in this session"),
  [ErrorCode.UNKNOWN_BO]: info("UNKNOWN_BO", false, "no such buffer in this context"),
  [ErrorCode.OUT_OF_BOUNDS]: info("OUT_OF_BOUNDS", false, "offset or length outside the buffer"),
  [ErrorCode.OUT_OF_MEMORY]: info("OUT_OF_MEMORY", false, "device VRAM is full"),
  [ErrorCode.INVALID_SIZE]: info(
    "INVALID_SIZE",
    false,
    "size is zero or above the maximum buffer size",
  ),
  [ErrorCode.UNKNOWN_KERNEL]: info("UNKNOWN_KERNEL", false, "no kernel of that name"),
  [ErrorCode.BAD_KERNEL_ARGS]: info(
    "BAD_KERNEL_ARGS",
    false,
    "kernel arguments do not match its slots",
  ),
  [ErrorCode.NOT_MAPPED]: info("NOT_MAPPED", false, "buffer is not mapped"),
  [ErrorCode.ALREADY_MAPPED]: info("ALREADY_MAPPED", false, "buffer is already mapped"),
  [ErrorCode.BAD_STORE]: info("BAD_STORE", false, "store width not 1/2/4/8 or not aligned to it"),
  [ErrorCode.QUOTA_EXCEEDED]: info("QUOTA_EXCEEDED", false, "tenant quota exceeded"),
  [ErrorCode.LIMIT_EXCEEDED]: info("LIMIT_EXCEEDED", false, "a configured limit was hit"),
  [ErrorCode.FRAME_OUT_OF_ORDER]: info(
    "FRAME_OUT_OF_ORDER",
    false,
    "frame number is not the session's next",
  ),
  [ErrorCode.FRAME_REPEATED]: info(
    "FRAME_REPEATED",
    false,
    "frame already applied and its reply is no longer cached",
  ),
  [ErrorCode.MALFORMED]: info("MALFORMED", false, "message malformed or incomplete"),
  [ErrorCode.UNAUTHENTICATED]: info(
    "UNAUTHENTICATED",
    false,
    "unknown tenant or wrong credentials",
  ),
  [ErrorCode.UNKNOWN_SESSION]: info("UNKNOWN_SESSION", false, "no such session on this node"),
  [ErrorCode.NOT_PRIMARY]: info("NOT_PRIMARY", true, "this node does not serve guests now"),
  [ErrorCode.STALE_EPOCH]: info("STALE_EPOCH", false, "message from an older epoch"),
  [ErrorCode.INTERNAL]: info("INTERNAL", false, "internal error"),
  [ErrorCode.WRONG_CLUSTER]: info(
    "WRONG_CLUSTER",
    false,
    "the other side belongs to another cluster",
  ),
  [ErrorCode.PRIMARY_LEASED]: info(
    "PRIMARY_LEASED",
    false,
    "the primary still holds its lease: not promoting (force overrides)",
  ),
  [ErrorCode.WRONG_PEER]: info("WRONG_PEER", false, "not this node's configured peer"),
  [ErrorCode.INCOMPATIBLE_VERSION]: info(
    "INCOMPATIBLE_VERSION",
    false,
    "the replication peer speaks another replication protocol version",
  ),
  [ErrorCode.NOT_STANDBY]: info("NOT_STANDBY", false, "the action runs on a standby"),
  [ErrorCode.REPLICA_INELIGIBLE]: info(
    "REPLICA_INELIGIBLE",
    false,
    "the standby is not an eligible replica (incomplete or diverged)",
  ),
  [ErrorCode.HANDOVER_FAILED]: info("HANDOVER_FAILED", true, "no standby in sync to hand over to"),
  [ErrorCode.NO_PRIMARY_IN_SIGHT]: info(
    "NO_PRIMARY_IN_SIGHT",
    true,
    "no primary in sight to resync from",
  ),
  [ErrorCode.SESSION_EXPIRED]: info(
    "SESSION_EXPIRED",
    false,
    "the pair closed this session (idle too long, or an operator); open a new one",
  ),
  [ErrorCode.LEADER_KEY_HELD]: info(
    "LEADER_KEY_HELD",
    false,
    "another node holds the etcd leader key: not promoting",
  ),
  [ErrorCode.SWITCHOVER_IN_PROGRESS]: info(
    "SWITCHOVER_IN_PROGRESS",
    true,
    "a switchover is already in progress",
  ),
  [ErrorCode.STANDBY_TIMED_OUT]: info(
    "STANDBY_TIMED_OUT",
    true,
    "the standby did not catch up, take over or answer in time",
  ),
  [ErrorCode.NO_STANDBY_IN_SYNC]: info(
    "NO_STANDBY_IN_SYNC",
    true,
    "no standby in sync to compare with",
  ),
  [ErrorCode.ADMIN_DISABLED]: info(
    "ADMIN_DISABLED",
    false,
    "admin actions are off: no ops.token configured",
  ),
  [ErrorCode.DEVICE_FAULT]: info(
    "DEVICE_FAULT",
    false,
    "the call was in flight on a device that failed; it was not run again and had no effect",
  ),
  [ErrorCode.SNAPSHOT_STALE]: info(
    "SNAPSHOT_STALE",
    false,
    "the snapshot pulled is not the one the primary is sending now",
  ),
};

export function errorName(code: ErrorCode): string {
  return ERROR_CATALOGUE[code]?.name ?? `ERROR_${code}`;
}

/** An operating error: expected, typed, reported to whoever caused it. */
export class VgpuError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    const entry = ERROR_CATALOGUE[code];
    super(message ?? entry?.description ?? "error", options);
    this.name = `VgpuError(${errorName(code)})`;
    this.code = code;
    this.retryable = entry?.retryable ?? false;
  }
}

/** A broken invariant is a programmer error: it crashes, in production too. */
export function invariant(condition: unknown, message: string): asserts condition {
  if (!condition) throw new InvariantError(message);
}

export class InvariantError extends Error {
  override name = "InvariantError";
}
