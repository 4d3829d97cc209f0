// Maintenance mode (vgpuctl pause / resume): while paused, a standby does not take over on its
// own (switchover and promote still work). Kept in the state directory so a restart keeps it;
// a standby follows the flag its primary's heartbeats carry.
import { ErrorCode, type Logger } from "@vgpu-ha/common";
import { OpsRefusal } from "../node-helpers.js";
import type { Maintenance, MaintenanceStore } from "./maintenance-store.js";

export class MaintenanceMode {
  private readonly store: MaintenanceStore;
  private readonly alertAfterMs: number;
  private readonly log: () => Logger;
  /** This node is a standby whose primary is in sight (it follows the primary's flag). */
  private readonly following: () => boolean;
  private current: Maintenance | undefined;

  constructor(
    store: MaintenanceStore,
    alertAfterMs: number,
    log: () => Logger,
    following: () => boolean,
  ) {
    this.store = store;
    this.alertAfterMs = alertAfterMs;
    this.log = log;
    this.following = following;
    this.current = store.read();
  }

  paused(): boolean {
    return this.current !== undefined;
  }

  sinceMs(): number | undefined {
    return this.current?.sinceMs;
  }

  /**
   * Operator: pause automatic failover. On the primary; a standby accepts it only while no
   * primary is in sight (otherwise the primary's heartbeats would undo it at once).
   */
  pause(caller: string): Record<string, unknown> {
    this.refuseOnFollowingStandby("pause");
    this.set({ sinceMs: Date.now(), by: caller });
    return this.view();
  }

  resume(caller: string): Record<string, unknown> {
    this.refuseOnFollowingStandby("resume");
    if (this.current)
      this.log().warn({ by: caller }, "maintenance mode ended: automatic failover on");
    this.set(undefined);
    return this.view();
  }

  /** A standby follows its primary's flag, carried on every heartbeat. */
  adopt(paused: boolean): void {
    if (paused === this.paused()) return;
    this.set(paused ? { sinceMs: Date.now(), by: "primary" } : undefined);
  }

  view() {
    const m = this.current;
    return m
      ? {
          paused: true,
          since: new Date(m.sinceMs).toISOString(),
          pausedSeconds: Math.max(0, (Date.now() - m.sinceMs) / 1000),
          by: m.by,
          alertAfterSeconds: this.alertAfterMs / 1000,
        }
      : { paused: false };
  }

  private refuseOnFollowingStandby(what: string): void {
    if (this.following()) {
      throw new OpsRefusal(
        409,
        `${what} the primary: it replicates maintenance mode to this standby`,
        ErrorCode.NOT_PRIMARY,
      );
    }
  }

  private set(m: Maintenance | undefined): void {
    if (m && this.current) return; // already paused: keep when and by whom
    this.store.write(m);
    this.current = m;
    if (m) this.log().warn({ by: m.by }, "maintenance mode: no automatic failover until resumed");
  }
}
