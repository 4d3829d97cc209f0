// The simulated clock's agenda: events ordered by due time, ties broken by the order they were
// scheduled in, so a run never depends on anything but its seed.
interface Scheduled<T> {
  readonly atMs: number;
  readonly order: number;
  readonly event: T;
}

export class EventQueue<T> {
  private readonly heap: Scheduled<T>[] = [];
  private scheduled = 0;

  get size(): number {
    return this.heap.length;
  }

  push(atMs: number, event: T): void {
    const heap = this.heap;
    heap.push({ atMs, order: this.scheduled++, event });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  /** When the earliest event is due, or undefined when none is left. */
  peekMs(): number | undefined {
    return this.heap[0]?.atMs;
  }

  /** The earliest event, or undefined when none is left. */
  pop(): { atMs: number; event: T } | undefined {
    const heap = this.heap;
    const top = heap[0];
    if (top === undefined) return undefined;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      this.siftDown();
    }
    return top;
  }

  private siftDown(): void {
    const heap = this.heap;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < heap.length && before(heap[left]!, heap[least]!)) least = left;
      if (right < heap.length && before(heap[right]!, heap[least]!)) least = right;
      if (least === i) return;
      [heap[i], heap[least]] = [heap[least]!, heap[i]!];
      i = least;
    }
  }
}

function before<T>(a: Scheduled<T>, b: Scheduled<T>): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.order < b.order);
}
