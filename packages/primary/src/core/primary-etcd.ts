// etcd mode, the primary's side of the cluster record as requests (raft's Ready: the machine
// says what to ask etcd, the driver asks, the answer comes back as an input). One request at a
// time. Keeps the record's `replica` in step with the grant — named once the standby has
// everything released, cleared (and only then the grant dropped) when the standby's link
// lapses or a snapshot replaced its state — and takes the key back after losing it while the
// acquisition rule allows (this node holds the newest state). Answers that come after the role
// stopped change nothing.
import { type ClusterRecord, mayAcquire } from "@vgpu-ha/common/core";

/** What to ask etcd. `purpose` says what the answer means to the machine. */
export type EtcdRequest =
  | { readonly kind: "read" }
  | { readonly kind: "acquire"; readonly epoch: number }
  | {
      readonly kind: "setReplica";
      readonly epoch: number;
      /** The node named as the one that may take over; "" for none. */
      readonly replica: string;
      readonly purpose: "name" | "clear" | "handover";
    }
  | { readonly kind: "resign" };

/** What a read of the leader key and the record said. */
export interface EtcdReadView {
  /** The leader key exists (some node holds it). */
  readonly leader: unknown;
  readonly record: ClusterRecord | undefined;
}

/** What the etcd requests decide, for the primary machine to apply. */
export type EtcdOutcome =
  | { readonly kind: "none" }
  /** The record names the standby now (the heartbeat grant may follow). */
  | { readonly kind: "named" }
  /** The record names no standby now: the grant is dropped, replies may go out. */
  | { readonly kind: "cleared" }
  /** The key is this node's again, at this epoch (adopt it; the grant starts over). */
  | { readonly kind: "retaken"; readonly epoch: number }
  /** The standby is named for a handover: give the key up for it. */
  | { readonly kind: "resign" };

export interface EtcdRequestsOptions {
  readonly nodeId: string;
  readonly configuredPrimary: boolean;
  /** How often a node that lost the key tries to take it back (lease.etcd.pollMs). */
  readonly pollMs: number;
}

export class EtcdRequests {
  private readonly options: EtcdRequestsOptions;
  /** The request under way (one at a time). */
  private pending: EtcdRequest | undefined;
  private lastTryMs = Number.NEGATIVE_INFINITY;
  /** The role stopped: answers still to come are ignored. */
  private stopped = false;

  constructor(options: EtcdRequestsOptions) {
    this.options = options;
  }

  get busy(): boolean {
    return this.pending !== undefined;
  }

  stop(): void {
    this.stopped = true;
  }

  /**
   * Starts `request` unless one is under way (`always`: even then — a handover must not wait
   * for a poll's request); the request to send, or undefined.
   */
  begin(request: EtcdRequest, always = false): EtcdRequest | undefined {
    if (this.stopped || (this.pending !== undefined && !always)) return undefined;
    if (request.kind !== "resign") this.pending = request;
    return request;
  }

  /** Without the key: a read, at most every pollMs (undefined: not now). */
  retake(nowMs: number): EtcdRequest | undefined {
    if (this.stopped || this.pending !== undefined) return undefined;
    if (nowMs - this.lastTryMs < this.options.pollMs) return undefined;
    this.lastTryMs = nowMs;
    return this.begin({ kind: "read" });
  }

  /**
   * The answer to a read: the acquisition to ask for next, if the rule allows it (the key is
   * free and this node holds the newest state).
   */
  readAnswered(view: EtcdReadView | undefined, localEpoch: number): EtcdRequest | undefined {
    this.pending = undefined;
    if (view === undefined || view.leader || this.stopped) return undefined;
    const decision = mayAcquire({
      me: this.options.nodeId,
      configuredPrimary: this.options.configuredPrimary,
      leaderPresent: false,
      record: view.record,
      mine: "primary-state",
      peer: undefined,
      localEpoch,
    });
    if (!decision.acquire) return undefined;
    return this.begin({ kind: "acquire", epoch: decision.epoch });
  }

  /**
   * The answer to `request` (`ok`: acquired or written). Any answer frees the way for the next
   * request, as one busy flag would.
   */
  answered(request: EtcdRequest, ok: boolean): EtcdOutcome {
    this.pending = undefined;
    if (!ok || this.stopped) return { kind: "none" };
    if (request.kind === "acquire") return { kind: "retaken", epoch: request.epoch };
    if (request.kind !== "setReplica") return { kind: "none" };
    if (request.purpose === "clear") return { kind: "cleared" };
    if (request.purpose === "handover") return { kind: "resign" };
    return { kind: "named" };
  }
}
