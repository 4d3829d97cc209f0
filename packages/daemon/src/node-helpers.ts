// Small pieces of the node's composition: the admin refusal with its HTTP status and code, a
// listener bind that names its config field, host:port splitting, and the test-only stall.
import { type ErrorCode, errorName } from "@vgpu-ha/common";

/** An admin action refused, with the HTTP status to answer and its stable code. */
export class OpsRefusal extends Error {
  readonly status: number;
  /** The catalogue name (errors.ts), e.g. NOT_STANDBY. */
  readonly code: string | undefined;
  constructor(status: number, message: string, code?: ErrorCode) {
    super(message);
    this.status = status;
    this.code = code === undefined ? undefined : errorName(code);
  }
}

/** A listener that failed to bind says which field: "ops.listen 10.0.0.1:9400: …". */
export async function bound<T>(field: string, address: string, binding: Promise<T>): Promise<T> {
  try {
    return await binding;
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new Error(`${field} ${address}: cannot bind: ${why}`, { cause: e });
  }
}

export function splitHostPort(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  return [host, Number(address.slice(i + 1))];
}

/** Test-only: holds the event loop (and this thread) for `ms`, as a long synchronous task would. */
export function busyWait(ms: number): Record<string, unknown> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
  return { stalledMs: ms };
}
