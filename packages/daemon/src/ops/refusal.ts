// Operator refusals as the ops API answers them: a stable code from the error catalogue (its
// name, e.g. PRIMARY_LEASED) and the HTTP status that code maps to. The roles and the node throw
// a VgpuError (or the node's OpsRefusal, which carries its status and code name); anything else
// thrown is a failure, not a refusal: 500 and no code.
import { ErrorCode, errorName, VgpuError } from "@vgpu-ha/common/core";

/** The HTTP status of a refusal by its code; every code not listed answers 409 Conflict. */
const HTTP_STATUS: Partial<Record<ErrorCode, number>> = {
  [ErrorCode.UNAUTHENTICATED]: 401,
  [ErrorCode.ADMIN_DISABLED]: 403,
  [ErrorCode.UNKNOWN_SESSION]: 404,
  [ErrorCode.STANDBY_TIMED_OUT]: 504,
};

export function httpStatusOf(code: ErrorCode): number {
  return HTTP_STATUS[code] ?? 409;
}

/** What an admin endpoint answers for a refusal or a failure. */
export interface Refusal {
  readonly status: number;
  /** The catalogue name; absent for a failure that is no refusal. */
  readonly code?: string;
  readonly message: string;
}

/** A refusal with its code (the status from the code), for the endpoints' own refusals. */
export function refusal(code: ErrorCode, message?: string): Refusal {
  const e = new VgpuError(code, message);
  return { status: httpStatusOf(code), code: errorName(code), message: e.message };
}

/** An error thrown by an admin action, as the endpoint answers it. */
export function refusalOf(e: unknown): Refusal {
  if (e instanceof VgpuError) return refusal(e.code, e.message);
  const err = e as { status?: unknown; code?: unknown; message?: unknown };
  const message = typeof err?.message === "string" ? err.message : String(e);
  const status = typeof err?.status === "number" ? err.status : 500;
  return typeof err?.code === "string" ? { status, code: err.code, message } : { status, message };
}

/** The code an error carries when it is a VgpuError, else `fallback` (to wrap it as a refusal). */
export function codeOr(e: unknown, fallback: ErrorCode): ErrorCode {
  return e instanceof VgpuError ? e.code : fallback;
}
