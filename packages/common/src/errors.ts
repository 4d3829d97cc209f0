// The edge of the error catalogue: the gRPC status each code maps to. The catalogue itself (name,
// retryable, description) is the core's (core/errors.ts, loadable without grpc-js); this file
// joins the two for the servers, and is what the barrel exports as ERROR_CATALOGUE.
import { status as GrpcStatus } from "@grpc/grpc-js";
import { ERROR_CATALOGUE as CORE_CATALOGUE, ErrorCode, type ErrorInfo } from "./core/errors.js";

export {
  ErrorCode,
  type ErrorInfo,
  errorName,
  InvariantError,
  invariant,
  VgpuError,
} from "./core/errors.js";

/** The gRPC status a guest or a peer receives for each code. */
export const GRPC_STATUS: Readonly<Record<ErrorCode, GrpcStatus>> = {
  [ErrorCode.OK]: GrpcStatus.OK,
  [ErrorCode.UNKNOWN_CONTEXT]: GrpcStatus.NOT_FOUND,
  [ErrorCode.UNKNOWN_BO]: GrpcStatus.NOT_FOUND,
  [ErrorCode.OUT_OF_BOUNDS]: GrpcStatus.OUT_OF_RANGE,
  [ErrorCode.OUT_OF_MEMORY]: GrpcStatus.RESOURCE_EXHAUSTED,
  [ErrorCode.INVALID_SIZE]: GrpcStatus.INVALID_ARGUMENT,
  [ErrorCode.UNKNOWN_KERNEL]: GrpcStatus.INVALID_ARGUMENT,
  [ErrorCode.BAD_KERNEL_ARGS]: GrpcStatus.INVALID_ARGUMENT,
  [ErrorCode.NOT_MAPPED]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.ALREADY_MAPPED]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.BAD_STORE]: GrpcStatus.INVALID_ARGUMENT,
  [ErrorCode.QUOTA_EXCEEDED]: GrpcStatus.RESOURCE_EXHAUSTED,
  [ErrorCode.LIMIT_EXCEEDED]: GrpcStatus.RESOURCE_EXHAUSTED,
  [ErrorCode.FRAME_OUT_OF_ORDER]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.FRAME_REPEATED]: GrpcStatus.ALREADY_EXISTS,
  [ErrorCode.MALFORMED]: GrpcStatus.INVALID_ARGUMENT,
  [ErrorCode.UNAUTHENTICATED]: GrpcStatus.UNAUTHENTICATED,
  [ErrorCode.UNKNOWN_SESSION]: GrpcStatus.NOT_FOUND,
  [ErrorCode.NOT_PRIMARY]: GrpcStatus.UNAVAILABLE,
  [ErrorCode.STALE_EPOCH]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.INTERNAL]: GrpcStatus.INTERNAL,
  [ErrorCode.WRONG_CLUSTER]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.PRIMARY_LEASED]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.WRONG_PEER]: GrpcStatus.PERMISSION_DENIED,
  [ErrorCode.INCOMPATIBLE_VERSION]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.NOT_STANDBY]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.REPLICA_INELIGIBLE]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.HANDOVER_FAILED]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.NO_PRIMARY_IN_SIGHT]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.SESSION_EXPIRED]: GrpcStatus.NOT_FOUND,
  [ErrorCode.LEADER_KEY_HELD]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.SWITCHOVER_IN_PROGRESS]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.STANDBY_TIMED_OUT]: GrpcStatus.DEADLINE_EXCEEDED,
  [ErrorCode.NO_STANDBY_IN_SYNC]: GrpcStatus.FAILED_PRECONDITION,
  [ErrorCode.ADMIN_DISABLED]: GrpcStatus.PERMISSION_DENIED,
  [ErrorCode.DEVICE_FAULT]: GrpcStatus.ABORTED,
  [ErrorCode.SNAPSHOT_STALE]: GrpcStatus.FAILED_PRECONDITION,
};

export interface GrpcErrorInfo extends ErrorInfo {
  readonly grpcStatus: GrpcStatus;
}

/** The core's catalogue with the gRPC status column, for the servers. */
export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, GrpcErrorInfo>> = Object.fromEntries(
  Object.entries(CORE_CATALOGUE).map(([code, entry]) => [
    code,
    { ...entry, grpcStatus: GRPC_STATUS[Number(code) as ErrorCode] },
  ]),
) as Record<ErrorCode, GrpcErrorInfo>;

export function grpcStatusOf(code: ErrorCode): GrpcStatus {
  return GRPC_STATUS[code] ?? GrpcStatus.UNKNOWN;
}
