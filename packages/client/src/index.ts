export type { GuestTls } from "./connection.js";
export { type DemoStep, runDemo } from "./demo/demo-guest.js";
export {
  ErrorCode,
  errorName,
  SessionClosedError,
  SessionExpiredError,
  VgpuError,
} from "./errors.js";
export { MappedBuffer } from "./mapped-buffer.js";
export { buf, f32, i32, Session, type SessionOptions, u32 } from "./session.js";
export { invalidCall, invalidStores } from "./validate.js";
