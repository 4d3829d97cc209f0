// The shared guards of the replication decoders (replication-codec.ts, entry-codec.ts,
// snapshot-codec.ts): a leaf decoder throws MalformedError; the public decoders catch it, so
// decoding as a whole never throws.
import { MalformedError } from "./call-codec.js";

export const malformed = (message: string): never => {
  throw new MalformedError(message);
};

/** Runs a throwing decoder; its MalformedError is returned, anything else is rethrown. */
export function catching<T>(decode: () => T): T | MalformedError {
  try {
    return decode();
  } catch (e) {
    if (e instanceof MalformedError) return e;
    throw e;
  }
}

/** A copy of a bytes field, detached from the receive buffer it may be a view into. */
export const copy = (view: Uint8Array): Uint8Array => new Uint8Array(view);

export const present = <T>(value: T | undefined, what: string): T =>
  value === undefined ? malformed(`${what} missing`) : value;
