// The node's role history (`GET /v1/history`, `vgpuctl history`): each role change appended to
// history.jsonl with who asked for it — an operator (set by the admin action that asks), the
// peer (a handover) or the node itself.
import type { Logger } from "@vgpu-ha/common";
import { HistoryStore, type RoleChange } from "./history-store.js";

export class RoleHistory {
  private readonly store: HistoryStore;
  private readonly nodeId: string;
  /** The newest role change (from the history file at start). */
  last: RoleChange | undefined;
  /** Who asked for the role change under way (an operator action); consumed by record(). */
  askedBy: string | undefined;

  constructor(stateDir: string, nodeId: string) {
    this.store = new HistoryStore(stateDir);
    this.nodeId = nodeId;
    this.last = this.store.read(1)[0];
  }

  read(): RoleChange[] {
    return this.store.read();
  }

  /** Appends a change; a full disk is logged, never stops the role change. */
  record(
    change: { epoch: number; from: string; to: string; reason: string; seq: number },
    log: Logger,
  ): void {
    const by = this.askedBy ?? (change.reason === "switchover" ? "peer" : "automatic");
    this.askedBy = undefined;
    const full: RoleChange = { at: new Date().toISOString(), node: this.nodeId, ...change, by };
    this.last = full;
    try {
      this.store.append(full);
    } catch (e) {
      log.error({ err: (e as Error).message }, "could not append to the role history");
    }
  }
}
