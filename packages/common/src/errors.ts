// The one catalogue of operating errors: a stable code (from proto), the gRPC status it maps
// to, whether a client may retry it, and a description. Programmer errors use invariant().
import { status as GrpcStatus } from "@grpc/grpc-js";
import { ErrorCode } from "./gen/vgpu/v1/types_pb.js";

export { ErrorCode };

export interface ErrorInfo {
  readonly name: string;
  readonly grpcStatus: GrpcStatus;
  readonly retryable: boolean;
  readonly description: string;
}

const info = (
  name: string,
  grpcStatus: GrpcStatus,
  retryable: boolean,
  description: string,
): ErrorInfo => ({ name, grpcStatus, retryable, description });

export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, ErrorInfo>> = {
  [ErrorCode.OK]: info("OK", GrpcStatus.OK, false, "success"),
  [ErrorCode.UNKNOWN_CONTEXT]: info(
    "UNKNOWN_CONTEXT",
    GrpcStatus.NOT_FOUND,
    false,
    "no such context in this session",
  ),
  [ErrorCode.UNKNOWN_BO]: info(
    "UNKNOWN_BO",
    GrpcStatus.NOT_FOUND,
    false,
    "no such buffer in this context",
  ),
  [ErrorCode.OUT_OF_BOUNDS]: info(
    "OUT_OF_BOUNDS",
    GrpcStatus.OUT_OF_RANGE,
    false,
    "offset or length outside the buffer",
  ),
  [ErrorCode.OUT_OF_MEMORY]: info(
    "OUT_OF_MEMORY",
    GrpcStatus.RESOURCE_EXHAUSTED,
    false,
    "device VRAM is full",
  ),
  [ErrorCode.INVALID_SIZE]: info(
    "INVALID_SIZE",
    GrpcStatus.INVALID_ARGUMENT,
    false,
    "size is zero or above the maximum buffer size",
  ),
  [ErrorCode.UNKNOWN_KERNEL]: info(
    "UNKNOWN_KERNEL",
    GrpcStatus.INVALID_ARGUMENT,
    false,
    "no kernel of that name",
  ),
  [ErrorCode.BAD_KERNEL_ARGS]: info(
    "BAD_KERNEL_ARGS",
    GrpcStatus.INVALID_ARGUMENT,
    false,
    "kernel arguments do not match its slots",
  ),
  [ErrorCode.NOT_MAPPED]: info(
    "NOT_MAPPED",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "buffer is not mapped",
  ),
  [ErrorCode.ALREADY_MAPPED]: info(
    "ALREADY_MAPPED",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "buffer is already mapped",
  ),
  [ErrorCode.BAD_STORE]: info(
    "BAD_STORE",
    GrpcStatus.INVALID_ARGUMENT,
    false,
    "store width not 1/2/4/8 or not aligned to it",
  ),
  [ErrorCode.QUOTA_EXCEEDED]: info(
    "QUOTA_EXCEEDED",
    GrpcStatus.RESOURCE_EXHAUSTED,
    false,
    "tenant quota exceeded",
  ),
  [ErrorCode.LIMIT_EXCEEDED]: info(
    "LIMIT_EXCEEDED",
    GrpcStatus.RESOURCE_EXHAUSTED,
    false,
    "a configured limit was hit",
  ),
  [ErrorCode.FRAME_OUT_OF_ORDER]: info(
    "FRAME_OUT_OF_ORDER",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "frame number is not the session's next",
  ),
  [ErrorCode.FRAME_REPEATED]: info(
    "FRAME_REPEATED",
    GrpcStatus.ALREADY_EXISTS,
    false,
    "frame already applied and its reply is no longer cached",
  ),
  [ErrorCode.MALFORMED]: info(
    "MALFORMED",
    GrpcStatus.INVALID_ARGUMENT,
    false,
    "message malformed or incomplete",
  ),
  [ErrorCode.UNAUTHENTICATED]: info(
    "UNAUTHENTICATED",
    GrpcStatus.UNAUTHENTICATED,
    false,
    "unknown tenant or wrong credentials",
  ),
  [ErrorCode.UNKNOWN_SESSION]: info(
    "UNKNOWN_SESSION",
    GrpcStatus.NOT_FOUND,
    false,
    "no such session on this node",
  ),
  [ErrorCode.NOT_PRIMARY]: info(
    "NOT_PRIMARY",
    GrpcStatus.UNAVAILABLE,
    true,
    "this node does not serve guests now",
  ),
  [ErrorCode.STALE_EPOCH]: info(
    "STALE_EPOCH",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "message from an older epoch",
  ),
  [ErrorCode.INTERNAL]: info("INTERNAL", GrpcStatus.INTERNAL, false, "internal error"),
  [ErrorCode.WRONG_CLUSTER]: info(
    "WRONG_CLUSTER",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "the other side belongs to another cluster",
  ),
  [ErrorCode.PRIMARY_LEASED]: info(
    "PRIMARY_LEASED",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "the primary still holds its lease: not promoting (force overrides)",
  ),
  [ErrorCode.WRONG_PEER]: info(
    "WRONG_PEER",
    GrpcStatus.PERMISSION_DENIED,
    false,
    "not this node's configured peer",
  ),
  [ErrorCode.INCOMPATIBLE_VERSION]: info(
    "INCOMPATIBLE_VERSION",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "the replication peer speaks another replication protocol version",
  ),
  [ErrorCode.NOT_STANDBY]: info(
    "NOT_STANDBY",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "the action runs on a standby",
  ),
  [ErrorCode.REPLICA_INELIGIBLE]: info(
    "REPLICA_INELIGIBLE",
    GrpcStatus.FAILED_PRECONDITION,
    false,
    "the standby is not an eligible replica (incomplete or diverged)",
  ),
  [ErrorCode.HANDOVER_FAILED]: info(
    "HANDOVER_FAILED",
    GrpcStatus.FAILED_PRECONDITION,
    true,
    "no standby in sync to hand over to",
  ),
  [ErrorCode.NO_PRIMARY_IN_SIGHT]: info(
    "NO_PRIMARY_IN_SIGHT",
    GrpcStatus.FAILED_PRECONDITION,
    true,
    "no primary in sight to resync from",
  ),
  [ErrorCode.SESSION_EXPIRED]: info(
    "SESSION_EXPIRED",
    GrpcStatus.NOT_FOUND,
    false,
    "the pair closed this session (idle too long, or an operator); open a new one",
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
