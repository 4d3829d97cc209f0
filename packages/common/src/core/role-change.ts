// One entry of a node's role history (`GET /v1/history`, `vgpuctl history`, the state
// directory's history.jsonl): the daemon writes it, vgpuctl reads it.

export interface RoleChange {
  /** Wall-clock time of the change (ISO 8601). */
  readonly at: string;
  readonly node: string;
  /** The epoch the node holds after the change. */
  readonly epoch: number;
  /** The role before: "none" at process start. */
  readonly from: string;
  readonly to: string;
  /** cold_start, start, lease_expired, switchover, manual, higher_epoch, reinit, … */
  readonly reason: string;
  /** The last seq the node's state held at the change. */
  readonly seq: number;
  /** Who asked: "operator <remote address>", "peer" (a handover) or "automatic". */
  readonly by: string;
}
