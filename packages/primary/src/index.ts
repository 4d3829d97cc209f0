export {
  type ConnectionRefusal,
  FirstMessageDeadlines,
  type GuardedConnection,
  GuestGuard,
  type GuestGuardLimits,
} from "./core/guest-guard.js";
export type {
  GuestAction,
  GuestReply,
  GuestSessionsOptions,
  Released,
  Served,
} from "./core/guest-session-types.js";
export { GuestSessions } from "./core/guest-sessions.js";
export { IdleSessions, type SessionActivity } from "./core/idle-sessions.js";
export {
  type IncompleteMessageLimits,
  type IncompleteMessageOverflow,
  IncompleteMessages,
  MessageFramer,
  type StreamToReset,
  type TrackedStream,
} from "./core/incomplete-messages.js";
export * from "./core/primary-etcd.js";
export * from "./core/primary-machine.js";
export * from "./core/primary-switchover.js";
export {
  Sender,
  type SenderEvent,
  type SenderOptions,
  type SenderState,
  type SnapshotStream,
} from "./core/sender.js";
export {
  type MmioReplication,
  type Sequenced,
  Sequencer,
  type SequencerOptions,
} from "./core/sequencer.js";
export { SessionAdmission, type SessionAdmissionLimits } from "./core/session-admission.js";
export { decidePull, type PullDecision } from "./core/snapshot-pull.js";
export {
  type GuestRefusalInfo,
  GuestService,
  type GuestServiceDeps,
  type GuestServiceRefusal,
} from "./guest-service.js";
export { type PeerLink, PeerLinkShell } from "./peer-link.js";
export type {
  EtcdPort,
  GuestHooks,
  GuestPort,
  GuestPortFactory,
  GuestWork,
  LeaseThreadPort,
  PrimaryObserver,
  PrimarySupervisor,
} from "./ports.js";
export { PrimaryDriver, type PrimaryDriverOptions, type PrimaryPorts } from "./primary-driver.js";
export { ReplicationClient, type ReplicationClientDeps } from "./replication-client.js";
export { listSessions } from "./session-list.js";
export { type PullStream, SnapshotOutlet } from "./snapshot-outlet.js";
export type { SwitchoverOutcome, SwitchoverRefusal } from "./switchover.js";
export { TenantAuth, type TenantCredentials } from "./tenant-auth.js";
