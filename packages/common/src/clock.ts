// The real clock and timers, for the daemons. The Clock type is the core's (core/clock.ts).
import type { Clock } from "./core/clock.js";
import type { Timers } from "./core/ports.js";

export type { Clock } from "./core/clock.js";

export const systemClock: Clock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
};

/** Node's own timers, as the Timers port (core/ports.ts). */
export const nodeTimers: Timers = {
  setTimeout: (ms, fn) => setTimeout(fn, ms),
  setInterval: (ms, fn) => setInterval(fn, ms),
  clear: (t) => {
    if (t !== undefined) clearTimeout(t as NodeJS.Timeout);
  },
};
