// One direction of the simulated link between primary and standby. By default it behaves like
// TCP: in order, each message after a random latency. Faults, each at its run's rate: a
// message lost on its own, delivered twice, or held back past the ones sent after it. Breaking
// the link (everything in flight lost) is the simulation's business: it numbers connections
// and drops deliveries of an old one.
import type { NetworkParams } from "./params.js";
import type { SimRng } from "./rng.js";

export interface LinkStats {
  sent: number;
  dropped: number;
  duplicated: number;
  reordered: number;
}

export class SimLink {
  private readonly params: NetworkParams;
  private readonly rng: SimRng;
  /** When the last in-order message arrives: later ones may not overtake it. */
  private lastInOrderMs = 0;
  /** Faults off: the network has healed. */
  healed = false;
  readonly stats: LinkStats = { sent: 0, dropped: 0, duplicated: 0, reordered: 0 };

  constructor(params: NetworkParams, rng: SimRng) {
    this.params = params;
    this.rng = rng;
  }

  /** When the copies of a message sent now arrive (none when it is lost). */
  deliveryTimes(nowMs: number): number[] {
    const { rng, params } = this;
    this.stats.sent++;
    if (!this.healed && rng.chance(params.dropRate)) {
      this.stats.dropped++;
      return [];
    }
    const times = [this.arrival(nowMs)];
    if (!this.healed && rng.chance(params.dupRate)) {
      this.stats.duplicated++;
      times.push(this.arrival(nowMs));
    }
    return times;
  }

  /**
   * When something sent now arrives that is never lost nor reordered (the end of a stream, the
   * start of one): after everything sent before it.
   */
  inOrderTime(nowMs: number): number {
    const latency = this.rng.real(this.params.latencyMinMs, this.params.latencyMaxMs);
    this.lastInOrderMs = Math.max(this.lastInOrderMs, nowMs + latency);
    return this.lastInOrderMs;
  }

  /** A new connection: nothing of the old one constrains the order. */
  reset(): void {
    this.lastInOrderMs = 0;
  }

  private arrival(nowMs: number): number {
    const { rng, params } = this;
    const latency = rng.real(params.latencyMinMs, params.latencyMaxMs);
    if (!this.healed && rng.chance(params.reorderRate)) {
      this.stats.reordered++;
      return nowMs + latency + rng.real(0, params.reorderMaxMs);
    }
    this.lastInOrderMs = Math.max(this.lastInOrderMs, nowMs + latency);
    return this.lastInOrderMs;
  }
}
