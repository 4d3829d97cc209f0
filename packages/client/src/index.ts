export type { GuestTls } from "./connection.js";
export {
  FATAL,
  type NodeRefusal,
  type OpenedInfo,
  SessionMachine,
  type SessionStep,
} from "./core/session-machine.js";
export { type DemoStep, runDemo } from "./demo/demo-guest.js";
export {
  ErrorCode,
  errorName,
  SessionClosedError,
  SessionExpiredError,
  VgpuError,
} from "./errors.js";
export { MappedBuffer } from "./mapped-buffer.js";
export type { NodeStream, NodeStreamHandlers, SessionObserver, SessionPorts } from "./ports.js";
export { buf, f32, i32, Session, type SessionOptions, u32 } from "./session.js";
export { invalidCall, invalidStores } from "./validate.js";
