// One vgpud process as the simulator runs it: its own monotonic clock (a rate within the
// configured drift of real time, an origin of its own), its timers, and what happens to it
// when it is paused (SIGSTOP: no timer runs, what arrives waits in its sockets) or killed
// (SIGKILL: everything it held in memory is gone). Work runs like Node's event loop: one
// callback at a time, then the microtasks it queued (the supervisor's role changes run there,
// as they do on the daemon's promise chain).
import type { SimRng } from "../rng.js";
import type { World } from "./world.js";

export interface Timer {
  cancelled: boolean;
  readonly intervalMs: number | undefined;
  readonly fn: () => void;
  /** Fired while the process was paused: runs when it wakes. */
  due: boolean;
}

export type ProcessState = "running" | "paused" | "dead";

export class SimProcess {
  readonly name: string;
  readonly incarnation: number;
  state: ProcessState = "running";
  private readonly world: World;
  private readonly rate: number;
  private readonly originMs: number;
  private readonly startedRealMs: number;
  private readonly jitterMs: number;
  private readonly rng: SimRng;
  private readonly inbox: (() => void)[] = [];
  private readonly dueTimers: Timer[] = [];
  private readonly microtasks: (() => void)[] = [];
  private running = false;

  constructor(
    world: World,
    name: string,
    incarnation: number,
    clock: { rate: number; jitterMs: number },
    rng: SimRng,
  ) {
    this.world = world;
    this.name = name;
    this.incarnation = incarnation;
    this.rate = clock.rate;
    this.jitterMs = clock.jitterMs;
    this.rng = rng;
    this.originMs = rng.int(1, 5000);
    this.startedRealMs = world.nowMs;
  }

  /** This process's monotonic milliseconds (performance.now()). */
  now(): number {
    return this.originMs + (this.world.nowMs - this.startedRealMs) * this.rate;
  }

  /** Wall-clock-like milliseconds, increasing across restarts (snapshot ids). */
  wallMs(): number {
    return 1_700_000_000_000 + this.world.nowMs;
  }

  get alive(): boolean {
    return this.state !== "dead";
  }

  setTimeout(localMs: number, fn: () => void): Timer {
    const timer: Timer = { cancelled: false, intervalMs: undefined, fn, due: false };
    this.arm(timer, localMs);
    return timer;
  }

  setInterval(localMs: number, fn: () => void): Timer {
    const timer: Timer = { cancelled: false, intervalMs: localMs, fn, due: false };
    this.arm(timer, localMs);
    return timer;
  }

  clear(timer: Timer | undefined): void {
    if (timer) timer.cancelled = true;
  }

  private arm(timer: Timer, localMs: number): void {
    const realMs = Math.max(1, localMs) / this.rate + this.rng.real(0, this.jitterMs);
    this.world.after(realMs, `${this.name}:timer`, () => this.fire(timer));
  }

  private fire(timer: Timer): void {
    if (timer.cancelled || this.state === "dead") return;
    if (this.state === "paused") {
      if (!timer.due) {
        timer.due = true;
        this.dueTimers.push(timer);
      }
      return;
    }
    this.runTimer(timer);
  }

  private runTimer(timer: Timer): void {
    timer.due = false;
    if (timer.cancelled) return;
    if (timer.intervalMs !== undefined) this.arm(timer, timer.intervalMs);
    this.run(timer.fn);
  }

  /** Something arrives for this process (a message, a connection): handled now or on waking. */
  deliver(fn: () => void): void {
    if (this.state === "dead") return;
    if (this.state === "paused") this.inbox.push(fn);
    else this.run(fn);
  }

  /** Queues work after the current callback (a resolved promise's continuation). */
  defer(fn: () => void): void {
    if (this.state === "dead") return;
    this.microtasks.push(fn);
    if (!this.running) this.drain();
  }

  /** Runs one callback of this process, then its microtasks. */
  run(fn: () => void): void {
    if (this.state !== "running") return;
    if (this.running) {
      fn();
      return;
    }
    this.running = true;
    try {
      fn();
      this.drain();
    } finally {
      this.running = false;
    }
  }

  private drain(): void {
    while (this.microtasks.length > 0 && this.state === "running") {
      this.microtasks.shift()!();
    }
  }

  pause(): void {
    if (this.state === "running") this.state = "paused";
  }

  /**
   * Wakes a paused process. Node's loop may have been stopped waiting for I/O (what arrived is
   * read first) or between phases (expired timers run first): the run's seed decides.
   */
  resume(timersFirst: boolean): void {
    if (this.state !== "paused") return;
    this.state = "running";
    const timers = this.dueTimers.splice(0);
    const inbox = this.inbox.splice(0);
    const runTimers = () => {
      for (const t of timers) if (this.state === "running") this.runTimer(t);
    };
    const runInbox = () => {
      for (const fn of inbox) if (this.state === "running") this.run(fn);
    };
    if (timersFirst) {
      runTimers();
      runInbox();
    } else {
      runInbox();
      runTimers();
    }
  }

  kill(): void {
    this.state = "dead";
    this.inbox.length = 0;
    this.dueTimers.length = 0;
    this.microtasks.length = 0;
  }
}
