// The error of every decoder here: the bytes or message are out of shape (code MALFORMED).
// Apart from call-codec.ts so that the packed entry codec, which the core's retained log uses,
// loads nothing of grpc (core/errors.ts is the catalogue without its gRPC column).
import { ErrorCode } from "../core/errors.js";

export class MalformedError extends Error {
  readonly code = ErrorCode.MALFORMED;
}
