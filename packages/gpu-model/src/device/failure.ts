// Operations return a Failure (a code from the common catalogue and a message) or null.
// Failing operations change nothing.
import { ErrorCode } from "@vgpu-ha/common/core";

export interface Failure {
  readonly code: ErrorCode;
  readonly message: string;
}

export const fail = (code: ErrorCode, message: string): Failure => ({ code, message });

/** True when [offset, offset+length) lies inside [0, size), with no overflow possible. */
export function inRange(offset: number, length: number, size: number): boolean {
  return (
    Number.isSafeInteger(offset) &&
    Number.isSafeInteger(length) &&
    offset >= 0 &&
    length >= 0 &&
    offset <= size &&
    length <= size - offset
  );
}

export function outOfBounds(what: string, offset: number, length: number, size: number): Failure {
  return fail(
    ErrorCode.OUT_OF_BOUNDS,
    `${what}: offset ${offset} length ${length} outside buffer of ${size} bytes`,
  );
}
