export { type ApplyResult, applyEntry } from "./core/applier.js";
export {
  Receiver,
  type ReceiverEvent,
  type ReceiverOptions,
  type ReceiverState,
} from "./core/receiver.js";
export {
  type EtcdReading,
  type EtcdStatus,
  HANDOVER_POLL_MS,
  PARK_MS,
  type StandbyAction,
  type StandbyFacts,
  StandbyMachine,
  type StandbyMachineOptions,
  type StandbyNote,
} from "./core/standby-machine.js";
export { refuseGuests } from "./guest-refusal.js";
export type { LinkLogger, StandbyEtcd, StandbyGuests, StandbyObserver } from "./ports.js";
export {
  PULL_RETRY_MS,
  SnapshotPuller,
  type SnapshotPullPort,
} from "./snapshot-puller.js";
export { StandbyDriver, type StandbyDriverDeps, type StandbyTakeover } from "./standby-driver.js";
export { type ReplicationCall, StandbyLink, type StreamRefusal } from "./standby-link.js";
