// Which log entries each replica's state was built from, kept beside the state (per Backend
// object) and independent of the Receiver's and Sender's bookkeeping: a primary's appends, a
// standby's applies (each must follow the last exactly: no double apply, no gap), a snapshot
// installed (the source primary's entries up to its seq). At the end, the final primary's
// lineage is the history the checker replays on a fresh model from the guests' own frames.
import { type Entry, type EntryBody, ReplicationLog } from "@vgpu-ha/common";
import type { Backend } from "@vgpu-ha/gpu-model";
import { SimFailure } from "./world.js";

export class Lineages {
  private readonly byBackend = new WeakMap<Backend, Entry[]>();
  private readonly snapshots = new Map<string, readonly Entry[]>();

  of(backend: Backend): Entry[] {
    let entries = this.byBackend.get(backend);
    if (entries === undefined) {
      entries = [];
      this.byBackend.set(backend, entries);
    }
    return entries;
  }

  /** An entry is about to change `backend`'s state: it must be the next one. */
  follows(backend: Backend, entry: Entry, where: string): void {
    const entries = this.of(backend);
    if (entry.seq !== entries.length + 1) {
      const what = entry.seq <= entries.length ? "double apply" : "gap";
      throw new SimFailure(`${where}: ${what}: seq ${entry.seq} after ${entries.length}`);
    }
  }

  push(backend: Backend, entry: Entry): void {
    this.of(backend).push(entry);
  }

  /** A primary cut a snapshot of `backend` at `atSeq`. */
  snapshotTaken(snapshotId: number, atSeq: number, backend: Backend): void {
    const entries = this.of(backend);
    if (entries.length !== atSeq) {
      throw new SimFailure(
        `snapshot ${snapshotId} at seq ${atSeq} of a state at ${entries.length}`,
      );
    }
    const key = `${snapshotId}@${atSeq}`;
    if (this.snapshots.has(key)) throw new SimFailure(`snapshot id ${key} taken twice`);
    this.snapshots.set(key, entries.slice());
  }

  /** A standby installed a snapshot as `backend`. */
  snapshotInstalled(snapshotId: number, atSeq: number, backend: Backend): void {
    const source = this.snapshots.get(`${snapshotId}@${atSeq}`);
    if (source === undefined)
      throw new SimFailure(`snapshot ${snapshotId}@${atSeq} was never taken`);
    this.byBackend.set(backend, source.slice());
  }
}

/** The primary's log, recording each append in its state's lineage. */
export class LineageLog extends ReplicationLog {
  private readonly lineages: Lineages;
  private readonly backend: Backend;
  private readonly where: string;

  constructor(lastSeq: number, lineages: Lineages, backend: Backend, where: string) {
    super(lastSeq);
    this.lineages = lineages;
    this.backend = backend;
    this.where = where;
    const held = lineages.of(backend).length;
    if (held !== lastSeq) {
      throw new SimFailure(`${where}: a log from seq ${lastSeq} on a state holding ${held}`);
    }
  }

  override append(body: EntryBody, nowMs: number): Entry {
    const entry = super.append(body, nowMs);
    this.lineages.follows(this.backend, entry, this.where);
    this.lineages.push(this.backend, entry);
    return entry;
  }
}
