// Which guest stream the node serves next, so that no tenant can starve another: a queue per
// tenant (its streams with work waiting, served in turn), and the tenant served next is the
// one that has used the least service time. A tenant that was idle rejoins at the level of the
// tenants being served, so idling earns no credit to burst with later (start-time fair
// queuing). The caller measures what each piece of work cost and charges it. Pure.

export class FairQueue<T> {
  /** Keys with work waiting, each with its items in order. */
  private readonly ready = new Map<string, T[]>();
  /** Service time used, per key (ms, or any unit the caller charges in). */
  private readonly used = new Map<string, number>();
  /** Where service stands: the usage of the last key served. */
  private virtualNow = 0;

  get size(): number {
    let n = 0;
    for (const items of this.ready.values()) n += items.length;
    return n;
  }

  get empty(): boolean {
    return this.ready.size === 0;
  }

  /** Queues `item` behind the key's other items. */
  push(key: string, item: T): void {
    const items = this.ready.get(key);
    if (items !== undefined) {
      items.push(item);
      return;
    }
    this.used.set(key, Math.max(this.used.get(key) ?? 0, this.floor()));
    this.ready.set(key, [item]);
  }

  /** Takes the next item: the first of the key that has used the least. */
  shift(): { key: string; item: T } | undefined {
    let best: string | undefined;
    let bestUsed = Number.POSITIVE_INFINITY;
    for (const key of this.ready.keys()) {
      const u = this.used.get(key) ?? 0;
      if (u < bestUsed) {
        best = key;
        bestUsed = u;
      }
    }
    if (best === undefined) return undefined;
    const items = this.ready.get(best)!;
    const item = items.shift()!;
    if (items.length === 0) this.ready.delete(best);
    this.virtualNow = Math.max(this.virtualNow, bestUsed);
    return { key: best, item };
  }

  /** Adds what serving an item of `key` cost. */
  charge(key: string, cost: number): void {
    this.used.set(key, (this.used.get(key) ?? 0) + Math.max(0, cost));
  }

  /** Drops every waiting item for which `drop` is true. */
  remove(drop: (item: T) => boolean): void {
    for (const [key, items] of this.ready) {
      const kept = items.filter((i) => !drop(i));
      if (kept.length === 0) this.ready.delete(key);
      else this.ready.set(key, kept);
    }
  }

  /** The lowest usage among keys waiting now, or where service stands when none waits. */
  private floor(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const key of this.ready.keys()) min = Math.min(min, this.used.get(key) ?? 0);
    return Number.isFinite(min) ? min : this.virtualNow;
  }
}
