// Hand-driven ports for the StandbyDriver's tests: timers on a clock the test moves, and the
// primary's end of the replication stream.
import type { Link, PrimaryMessage, StandbyMessage, TimerHandle } from "@vgpu-ha/common";
import type { StandbyDriver } from "../standby-driver.js";

/** Timers on a clock the test moves. */
export class ManualTimers {
  nowMs = 0;
  private readonly timers = new Map<number, { at: number; every?: number; fn: () => void }>();
  private next = 1;

  setTimeout(ms: number, fn: () => void): TimerHandle {
    const id = this.next++;
    this.timers.set(id, { at: this.nowMs + ms, fn });
    return id as unknown as TimerHandle;
  }

  setInterval(ms: number, fn: () => void): TimerHandle {
    const id = this.next++;
    this.timers.set(id, { at: this.nowMs + ms, every: ms, fn });
    return id as unknown as TimerHandle;
  }

  clear(timer: TimerHandle | undefined): void {
    this.timers.delete(timer as unknown as number);
  }

  /** Fires every timer due up to `toMs`, in time order. */
  advance(toMs: number): void {
    for (;;) {
      const due = [...this.timers.entries()]
        .filter(([, t]) => t.at <= toMs)
        .sort((x, y) => x[1].at - y[1].at)[0];
      if (due === undefined) break;
      const [id, t] = due;
      this.nowMs = t.at;
      if (t.every === undefined) this.timers.delete(id);
      else t.at += t.every;
      t.fn();
    }
    this.nowMs = toMs;
  }
}

/** The primary's end of the replication stream, driven by the test. */
export function streamTo(driver: StandbyDriver<never>) {
  let deliver: ((m: PrimaryMessage) => void) | undefined;
  const link: Link<StandbyMessage, PrimaryMessage> = {
    send: () => true,
    onMessage: (handler) => {
      deliver = handler;
    },
    onDrain: () => undefined,
    onClose: () => undefined,
    close: () => undefined,
  };
  driver.acceptLink(link);
  return (m: PrimaryMessage) => deliver!(m);
}
