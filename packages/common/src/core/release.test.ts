// Proves the release and grant rules: a fenced primary releases nothing; a granted standby
// gates every reply (on the live link its applied seq, off it what it confirmed); an
// ungranted streaming standby gates replies until it earns the grant; the grant is due only
// once the standby applied everything released, revoked serving alone or once a snapshot
// replaced the standby's state — and that revocation gates replies until confirmed by an
// echoed heartbeat; and the peer lease steps leased → fenced →
// degraded (after a further lease) → leased.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type GrantState,
  grantBinds,
  grantDue,
  NO_GRANT,
  RELEASE_ALL,
  RELEASE_NONE,
  type ReleaseView,
  releasableSeq,
  stepGrant,
  stepPeerLease,
} from "./release.js";

const base: ReleaseView = {
  mode: "sync",
  lease: "leased",
  link: "streaming",
  granted: true,
  appliedSeq: 10,
  receivedSeq: 12,
  confirmedSeq: 8,
  deviceSeq: RELEASE_ALL,
};

describe("releasableSeq", () => {
  it.each<[Partial<ReleaseView>, number]>([
    [{}, 12],
    [{ mode: "sync-applied" }, 10],
    [{ deviceSeq: 11 }, 11],
    [{ mode: "sync-applied", deviceSeq: 11 }, 10],
    [{ mode: "async", deviceSeq: 11 }, 11],
    [{ granted: false, link: "down", deviceSeq: 7 }, 7],
    [{ lease: "fenced", deviceSeq: 7 }, RELEASE_NONE],
    [{ link: "down" }, 8],
    [{ link: "snapshot" }, 8],
    [{ lease: "fenced" }, RELEASE_NONE],
    [{ lease: "fenced", mode: "async" }, RELEASE_NONE],
    [{ mode: "async" }, RELEASE_ALL],
    [{ granted: false }, 10],
    [{ granted: false, mode: "sync-applied" }, 10],
    [{ granted: false, link: "down" }, RELEASE_ALL],
    [{ granted: false, link: "snapshot" }, RELEASE_ALL],
    [{ lease: "degraded", granted: false, link: "down" }, RELEASE_ALL],
    [{ lease: "degraded", granted: false, link: "streaming" }, 10],
  ])("%j → %d", (change, expected) => {
    expect(releasableSeq({ ...base, ...change })).toBe(expected);
  });

  it("with a granted standby never releases past what it received (sync) or applied (sync-applied) or confirmed, nor past the device", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("sync", "sync-applied" as const),
        fc.constantFrom("leased", "fenced", "degraded" as const),
        fc.constantFrom("streaming", "snapshot", "down" as const),
        fc.nat(1000),
        fc.nat(1000),
        fc.nat(1000),
        fc.nat(1000),
        (mode, lease, link, appliedSeq, more, confirmedSeq, deviceSeq) => {
          const receivedSeq = appliedSeq + more;
          const v: ReleaseView = {
            mode,
            lease,
            link,
            granted: true,
            appliedSeq,
            receivedSeq,
            confirmedSeq,
            deviceSeq,
          };
          const held = mode === "sync" ? receivedSeq : appliedSeq;
          expect(releasableSeq(v)).toBeLessThanOrEqual(Math.max(held, confirmedSeq));
          expect(releasableSeq(v)).toBeLessThanOrEqual(deviceSeq);
        },
      ),
    );
  });

  it("holds replies for a standby without the grant until it applied them, in both sync modes", () => {
    for (const mode of ["sync", "sync-applied"] as const) {
      expect(releasableSeq({ ...base, mode, granted: false })).toBe(base.appliedSeq);
    }
  });

  it("releases everything while a standby without the grant is far behind (it cannot take over)", () => {
    for (const mode of ["sync", "sync-applied"] as const) {
      const far = { ...base, mode, granted: false, standbyFarBehind: true };
      expect(releasableSeq({ ...far, deviceSeq: undefined })).toBe(RELEASE_ALL);
      expect(releasableSeq({ ...far, deviceSeq: 3 })).toBe(3);
      // A granted standby is waited for however far behind.
      expect(releasableSeq({ ...far, granted: true })).toBeLessThan(RELEASE_ALL);
    }
  });
});

describe("grantDue", () => {
  it.each<[Partial<ReleaseView> & { releasedSeq?: number }, boolean]>([
    [{ releasedSeq: 10 }, true],
    [{ releasedSeq: 11 }, false],
    [{ releasedSeq: 11, mode: "async" }, true],
    [{ releasedSeq: 0, link: "snapshot" }, false],
    [{ releasedSeq: 0, link: "down" }, false],
    [{ releasedSeq: 0, lease: "fenced" }, false],
    [{ releasedSeq: 0, lease: "degraded" }, false],
  ])("%j → %s", (change, expected) => {
    expect(grantDue({ ...base, granted: false, releasedSeq: 0, ...change })).toBe(expected);
  });
});

describe("stepGrant", () => {
  const v = {
    ...base,
    granted: false,
    releasedSeq: 10,
    snapshotChunksAcked: 0,
    nowUs: 5000,
    echoedUs: 4000,
  };
  const on: GrantState = { granted: true, revokedAtUs: undefined };
  const revoking: GrantState = { granted: false, revokedAtUs: 5000 };
  it.each<[GrantState, Partial<typeof v>, GrantState]>([
    [NO_GRANT, {}, on],
    [NO_GRANT, { releasedSeq: 11 }, NO_GRANT],
    [on, { releasedSeq: 11 }, on],
    [on, { lease: "fenced" }, on],
    [on, { lease: "degraded" }, NO_GRANT],
    [NO_GRANT, { lease: "degraded" }, NO_GRANT],
    [on, { link: "snapshot" }, on],
    [on, { link: "snapshot", snapshotChunksAcked: 1 }, revoking],
    [on, { link: "down" }, on],
    [NO_GRANT, { link: "snapshot", snapshotChunksAcked: 1 }, NO_GRANT],
    // the revocation binds until a heartbeat sent after it is echoed
    [revoking, { link: "snapshot", echoedUs: 5000 }, revoking],
    [revoking, { link: "snapshot", echoedUs: 5001 }, NO_GRANT],
    [revoking, { link: "snapshot", lease: "degraded" }, NO_GRANT],
    [revoking, {}, on],
  ])("%j with %j → %j", (prev, change, expected) => {
    expect(stepGrant(prev, { ...v, ...change })).toEqual(expected);
  });

  it("keeps replies gated while a revocation is unconfirmed", () => {
    expect(grantBinds(revoking)).toBe(true);
    const view = { ...base, granted: grantBinds(revoking), link: "snapshot" as const };
    expect(releasableSeq(view)).toBe(base.confirmedSeq);
    expect(releasableSeq({ ...view, granted: grantBinds(NO_GRANT) })).toBe(RELEASE_ALL);
  });
});

describe("stepPeerLease", () => {
  const L = 500;
  it("is leased before the lease end and fenced from it on", () => {
    const held = stepPeerLease({ lease: "fenced", fencedSinceMs: 0 }, 100, 101, L);
    expect(held).toEqual({ lease: "leased", fencedSinceMs: undefined, steppedMs: 100 });
    expect(stepPeerLease(held, 101, 101, L)).toEqual({
      lease: "fenced",
      fencedSinceMs: 101,
      steppedMs: 101,
    });
  });

  it("degrades after a further whole lease without the peer, and recovers", () => {
    // stepped every 100 ms, as the role's timer does
    let s = stepPeerLease({ lease: "leased", fencedSinceMs: undefined }, 1000, 900, L);
    expect(s).toEqual({ lease: "fenced", fencedSinceMs: 1000, steppedMs: 1000 });
    for (let t = 1100; t < 1500; t += 100) s = stepPeerLease(s, t, 900, L);
    s = stepPeerLease(s, 1499, 900, L);
    expect(s.lease).toBe("fenced");
    s = stepPeerLease(s, 1500, 900, L);
    expect(s.lease).toBe("degraded");
    expect(stepPeerLease(s, 9000, undefined, L).lease).toBe("degraded");
    expect(stepPeerLease(s, 9000, 9001, L).lease).toBe("leased");
  });

  it("a fenced primary that was stopped counts its fenced period from waking", () => {
    const fenced = { lease: "fenced" as const, fencedSinceMs: 1000, steppedMs: 1100 };
    // woke 2 s later: not degraded at once — a peer that took over has a lease to tell it
    const woke = stepPeerLease(fenced, 3100, 900, L);
    expect(woke).toEqual({ lease: "fenced", fencedSinceMs: 3100, steppedMs: 3100 });
    expect(stepPeerLease({ ...woke, steppedMs: 3500 }, 3599, 900, L).lease).toBe("fenced");
    expect(stepPeerLease({ ...woke, steppedMs: 3500 }, 3600, 900, L).lease).toBe("degraded");
    // a gap of exactly half a lease is not a pause
    expect(stepPeerLease({ ...fenced, steppedMs: 1250 }, 1500, 900, L).lease).toBe("degraded");
  });

  it("a fresh primary that never held the lease degrades after one lease", () => {
    let s = stepPeerLease({ lease: "fenced", fencedSinceMs: 0 }, 0, undefined, L);
    expect(s.lease).toBe("fenced");
    for (let t = 100; t < 500; t += 100) s = stepPeerLease(s, t, undefined, L);
    s = stepPeerLease(s, 500, undefined, L);
    expect(s.lease).toBe("degraded");
  });
});
