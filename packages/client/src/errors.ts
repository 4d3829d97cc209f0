// Errors the client library raises: a call's typed error (VgpuError from the common catalogue)
// or a session-level failure (the stream ended, authentication refused...).
import { ErrorCode, errorName, VgpuError } from "@vgpu-ha/common";

export { ErrorCode, errorName, VgpuError };

export class SessionClosedError extends Error {
  override name = "SessionClosedError";
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(`${errorName(code)}: ${message}`);
    this.code = code;
  }
}

/**
 * The pair ended this session without the guest asking: no stream was attached to it for the
 * node's guest.sessionIdleSeconds (the guest was away too long), or an operator closed it. Its
 * contexts and buffers are gone and no node will resume it: open a new session.
 */
export class SessionExpiredError extends SessionClosedError {
  override name = "SessionExpiredError";
  constructor(message: string) {
    super(ErrorCode.SESSION_EXPIRED, message);
  }
}
