export { type ApplyResult, applyEntry } from "./core/applier.js";
export {
  Receiver,
  type ReceiverEvent,
  type ReceiverOptions,
  type ReceiverState,
} from "./core/receiver.js";
export { refuseGuests } from "./guest-refusal.js";
export { type ReplicationCall, StandbyLink } from "./standby-link.js";
