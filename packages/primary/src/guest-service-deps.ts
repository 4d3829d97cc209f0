// What the guest service (guest-service.ts) is built from: the sequencer and the checks it
// serves guests with, and the ports it runs over (timers, the next turn, clocks, an observer).
import type { GuestLink, Logger, NodeMetrics, Timers, wire } from "@vgpu-ha/common";
import type { Released } from "./core/guest-session-types.js";
import type { IdleSessions } from "./core/idle-sessions.js";
import type { Sequencer } from "./core/sequencer.js";
import type { SessionAdmission } from "./core/session-admission.js";
import type { TenantAuth } from "./tenant-auth.js";

export interface GuestServiceDeps {
  readonly sequencer: Sequencer;
  readonly auth: TenantAuth;
  /** Limits on new sessions (counts and rate); none: unlimited. */
  readonly admission?: SessionAdmission;
  /**
   * Refused frames a tenant may cause per second (and in a burst): past them its streams wait
   * for the budget to refill before more of its frames are read. None: unlimited.
   */
  readonly refusals?: { readonly perSecond: number; readonly burst: number };
  /** Monotonic milliseconds (refusal budget, idle sessions); default performance.now. */
  readonly nowMs?: () => number;
  /** Which sessions have no stream attached, and since when (the idle reaper's rule). */
  readonly idle?: IdleSessions;
  readonly metrics: NodeMetrics;
  readonly log: Logger;
  readonly nodeId: string;
  readonly epoch: () => number;
  /** Frames a session may have sent and not had answered yet. */
  readonly maxFramesInFlight: number;
  /** Largest gRPC message: replies are split so no Acks message exceeds half of it. */
  readonly maxMessageBytes: number;
  /** Whether this node serves guests now; when not, streams get NOT_PRIMARY. */
  readonly serving: () => boolean;
  /**
   * Replies whose seq is at most this may go out: the seq the standby has applied (sync mode),
   * -1 to hold every reply (a primary without its lease), undefined to release at once.
   */
  readonly replicatedSeq: () => number | undefined;
  /**
   * Called after guest messages were applied (to schedule MMIO flush and sending): once per
   * deferral (`defer`), for every message served before it, and after a session is ended.
   */
  readonly afterApply?: () => void;
  /**
   * Called at once, synchronously, after each turn that served guest messages (afterApply
   * comes later, once per deferral): the host's back-pressure check, so that the messages read
   * in one poll of the sockets do not all pass the lag bound before afterApply runs.
   */
  readonly served?: () => void;
  /** Where guests should go instead, for NOT_PRIMARY. */
  readonly redirect?: () => string;
  /** This node's cluster id: an Open naming another one is answered WRONG_CLUSTER. */
  readonly clusterId?: string;
  /** A stream that sends no first message for this long is closed; none: never. */
  readonly openTimeoutMs?: number;
  /** Told of each guest refused for an open timeout, failed authentication or wrong cluster. */
  readonly onRefused?: (reason: GuestServiceRefusal, refusal: GuestRefusalInfo) => void;
  /** Timers (open timeout, refusal budgets, delayed refusals); default Node's. */
  readonly timers?: Timers;
  /** Runs `fn` after the host has read its sockets again (the next turn); default setImmediate. */
  readonly defer?: (fn: () => void) => void;
  /** Service time in ms, for the fair slices; default performance.now. */
  readonly cpuMs?: () => number;
  /** A new session's id; default a random UUID. */
  readonly newSessionId?: () => string;
  /** Told of every reply as it leaves, with what it released (the simulator's checker). */
  readonly onReply?: (
    link: GuestLink,
    message: wire.NodeMessage,
    released: readonly Released[],
  ) => void;
}

export type GuestServiceRefusal = "open_timeout" | "auth" | "wrong_cluster";

export interface GuestRefusalInfo {
  /** ip:port of the guest's connection. */
  readonly remote: string;
  /** The tenant name as the guest gave it. */
  readonly tenant?: string;
}
