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
