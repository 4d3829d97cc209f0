// The failover simulator's real time: one agenda of events (the existing EventQueue), the
// simulated "now" every node's clock is derived from, and the trace. Events are closures with
// a kind for the trace; a run depends on nothing but its seed.
import { EventQueue } from "../event-queue.js";
import { SimFailure } from "../standby-monitor.js";

export { SimFailure };

interface WorldEvent {
  readonly kind: string;
  readonly run: () => void;
}

export class World {
  nowMs = 0;
  private readonly queue = new EventQueue<WorldEvent>();
  events = 0;
  private hash = 0x811c9dc5;
  /** Called with a line per event when set (the CLI's --trace). */
  onTrace: ((line: string) => void) | undefined;
  /** A short state line for the trace. */
  describe: () => string = () => "";

  at(atMs: number, kind: string, run: () => void): void {
    if (!(atMs >= this.nowMs)) throw new SimFailure(`event ${kind} scheduled in the past`);
    this.queue.push(atMs, { kind, run });
  }

  after(delayMs: number, kind: string, run: () => void): void {
    this.at(this.nowMs + Math.max(0, delayMs), kind, run);
  }

  /** Runs the next event if it is due by `untilMs`; false when none is. */
  stepUntil(untilMs: number): boolean {
    const due = this.queue.peekMs();
    if (due === undefined || due > untilMs) return false;
    return this.step();
  }

  /** Runs the next event; false when none is left. */
  step(): boolean {
    const next = this.queue.pop();
    if (next === undefined) return false;
    this.nowMs = next.atMs;
    this.events++;
    this.record(next.event.kind);
    if (this.onTrace) {
      this.onTrace(`t=${this.nowMs.toFixed(3)} ${next.event.kind} | ${this.describe()}`);
    }
    next.event.run();
    return true;
  }

  /** A hash of every event's kind and time: equal for two runs of one seed. */
  get trace(): number {
    return this.hash >>> 0;
  }

  private record(kind: string): void {
    let h = this.hash;
    const t = Math.round(this.nowMs * 1000);
    for (let i = 0; i < kind.length; i++) h = Math.imul(h ^ kind.charCodeAt(i), 0x01000193);
    h = Math.imul(h ^ (t >>> 0), 0x01000193);
    h = Math.imul(h ^ Math.floor(t / 2 ** 32), 0x01000193);
    this.hash = h >>> 0;
  }
}
