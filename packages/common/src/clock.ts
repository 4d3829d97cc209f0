// Time as an input: the cores take a Clock; the daemons pass the real one, tests a fake.
export interface Clock {
  /** Monotonic milliseconds (leases, timeouts). Never goes back. */
  monotonicMs(): number;
  /** Wall-clock milliseconds since the epoch, for display only. */
  wallMs(): number;
}

export const systemClock: Clock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
};

/** Node's own timers, as the Timers port (core/ports.ts). */
export const nodeTimers: import("./core/ports.js").Timers = {
  setTimeout: (ms, fn) => setTimeout(fn, ms),
  setInterval: (ms, fn) => setInterval(fn, ms),
  clear: (t) => {
    if (t !== undefined) clearTimeout(t as NodeJS.Timeout);
  },
};
