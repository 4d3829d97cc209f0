// The normal guest an attack must not hurt: a counting guest (every acknowledged increment must
// be in the node's counter once; its acknowledgements a second are the throughput) and the
// seeded random workloads of guest-workload.ts at a steady pace (every result checked against
// a local replay). Both on both nodes' endpoints, so they follow a failover as clients do.
import { CountingGuest } from "../support/counting-guest.js";
import { GuestLoad } from "../support/guest-workload.js";

export interface GuestCredentials {
  readonly endpoints: readonly string[];
  readonly tenant: string;
  readonly token: string;
}

export interface GuestVerdict {
  /** Acknowledged rounds a second just before the attack, and during it. */
  readonly callsPerSecondBefore: number;
  readonly callsPerSecondDuring: number;
  /** During over before (the report's guestRatio); null when nothing was measured before. */
  readonly guestRatio: number | null;
  /** Rounds acknowledged during the attack (progress). */
  readonly acksDuring: number;
  /** Increments acknowledged but not in the node's counter (null: could not be read). */
  readonly lostAcked: number | null;
  /** Workload frames answered, and the ones whose result differed from the replay. */
  readonly workloadFrames: number;
  readonly wrongResults: string[];
  /** The first error either guest met (a failed session), if any. */
  readonly error: string | null;
}

export class NormalGuest {
  private counting: CountingGuest | undefined;
  private load: GuestLoad | undefined;
  private marks: { at: number; acks: number }[] = [];

  constructor(
    private readonly guest: GuestCredentials,
    private readonly seed: number,
    private readonly framesPerSecond = 200,
  ) {}

  private acks(): number {
    return this.counting?.ackTimes.length ?? 0;
  }

  /** Opens and starts both guests, then measures `beforeMs` of calm. */
  async start(beforeMs: number): Promise<void> {
    const endpoints = [...this.guest.endpoints];
    this.counting = await CountingGuest.open(endpoints, this.guest.tenant, this.guest.token);
    // Session.open takes `endpoints` too (tried first): the workload follows a failover.
    const credentials = {
      endpoint: endpoints[0]!,
      endpoints,
      tenant: this.guest.tenant,
      token: this.guest.token,
    };
    this.load = new GuestLoad(credentials, {
      sessions: 1,
      frames: 200,
      seed: this.seed,
      framesPerSecond: this.framesPerSecond,
    });
    this.counting.start();
    this.load.start();
    // Past the first round trips and the JIT's first passes (a fresh pair is slow at first).
    await new Promise((r) => setTimeout(r, Math.min(1000, beforeMs)));
    this.marks = [{ at: performance.now(), acks: this.acks() }];
    await new Promise((r) => setTimeout(r, beforeMs));
  }

  /** Marks the start and the end of the attack (the calm before ends at the first). */
  mark(): void {
    this.marks.push({ at: performance.now(), acks: this.acks() });
  }

  /** Stops both guests and checks them against the node. */
  async stop(): Promise<GuestVerdict> {
    const [m0, m1, m2] = this.marks;
    const rate = (a?: { at: number; acks: number }, b?: { at: number; acks: number }) =>
      a && b && b.at > a.at ? ((b.acks - a.acks) * 1000) / (b.at - a.at) : 0;
    const before = rate(m0, m1);
    const during = rate(m1, m2);
    let error: string | null = null;
    let lostAcked: number | null = null;
    let workload = { frames: 0, mismatches: [] as string[] };
    const counting = this.counting!;
    await counting.stop().catch((e: Error) => {
      error ??= `counting guest: ${e.message}`;
    });
    try {
      lostAcked = Math.max(0, counting.increments - (await counting.counterHeld()));
    } catch (e) {
      error ??= `counting guest: ${(e as Error).message}`;
      lostAcked = counting.increments; // its state cannot be read: none of it is known to be held
    }
    await counting.session.close().catch(() => undefined);
    try {
      workload = await this.load!.stop();
    } catch (e) {
      error ??= `workload: ${(e as Error).message}`;
    }
    await this.load!.close().catch(() => undefined);
    return {
      callsPerSecondBefore: before,
      callsPerSecondDuring: during,
      guestRatio: before > 0 ? during / before : null,
      acksDuring: (m2?.acks ?? 0) - (m1?.acks ?? 0),
      lostAcked,
      workloadFrames: workload.frames,
      wrongResults: workload.mismatches,
      error,
    };
  }
}
