// Time as an input: the cores take a Clock; the daemons pass the real one (../clock.ts), tests
// and the simulators a fake.
export interface Clock {
  /** Monotonic milliseconds (leases, timeouts). Never goes back. */
  monotonicMs(): number;
  /** Wall-clock milliseconds since the epoch, for display only. */
  wallMs(): number;
}
