// Proves the node driver carries out the machine's actions in order over fake ports: the epoch
// is on disk before the role that acts on it is built, a promotion builds the primary from the
// standby's takeover and hands it the parked guests, a step-down stops the primary, gives the
// etcd key up, builds a standby keeping the handed-over state and tells the old primary last;
// role changes asked from inside a role's callback run after it (the deferral), and the
// start callback fires once the first role is chosen.
import { describe, expect, it } from "vitest";
import { NOTHING_DISCARDED } from "./core/failover.js";
import type { PeerView, Timers } from "./core/ports.js";
import { NodeDriver, type NodePrimary, type NodeStandby } from "./node-driver.js";

type Log = string[];

class FakeStandby implements NodeStandby<string, string> {
  readonly parked: string[] = [];
  holdsReplica = true;
  inSight = false;
  constructor(
    private readonly log: Log,
    readonly kept: string | undefined,
  ) {}
  start() {
    this.log.push(`start standby${this.kept ? ` keeping ${this.kept}` : ""}`);
  }
  stop(reason: string) {
    this.log.push(`stop standby: ${reason}`);
  }
  probe() {
    return { role: "standby" as const, replica: true, appliedSeq: 7 };
  }
  serveGuest(stream: string) {
    this.parked.push(stream);
  }
  takeover(force: boolean) {
    return force || this.holdsReplica ? "replica@7" : undefined;
  }
  seenEpoch() {
    return 4;
  }
  primaryInSight() {
    return this.inSight;
  }
  takeParked() {
    return this.parked.splice(0);
  }
}

class FakePrimary implements NodePrimary<string, string> {
  readonly served: string[] = [];
  handed: string | undefined;
  constructor(
    private readonly log: Log,
    readonly from: string | undefined,
  ) {}
  start() {
    this.log.push(`start primary${this.from ? ` from ${this.from}` : ""}`);
  }
  stop(reason: string) {
    this.log.push(`stop primary: ${reason}`);
  }
  probe() {
    return { role: "primary" as const, replica: false, appliedSeq: 9 };
  }
  serveGuest(stream: string) {
    this.served.push(stream);
  }
  handedOver() {
    return this.handed;
  }
  soloWork() {
    return NOTHING_DISCARDED;
  }
  steppedDown() {
    this.log.push("told primary it stepped down");
  }
}

const noTimers: Timers = {
  setTimeout: () => ({}),
  setInterval: () => ({}),
  clear: () => undefined,
};

function rig(mode: "peer" | "etcd", answer: PeerView | undefined) {
  const log: Log = [];
  const microtasks: (() => void)[] = [];
  const standbys: FakeStandby[] = [];
  const primaries: FakePrimary[] = [];
  const driver = new NodeDriver<
    string,
    string,
    { leader: undefined; record: undefined },
    FakePrimary,
    FakeStandby
  >(
    { mode, configured: "primary", nodeId: "a", leaseMs: 500 },
    {
      persist: (epoch) => log.push(`persist ${epoch}`),
      probePeer: (done) => done(answer),
      etcd: {
        read: (done) => done(undefined, { leader: undefined, record: undefined }),
        acquire: (_view, epoch, done) => {
          log.push(`acquire ${epoch}`);
          done(undefined, true);
        },
        resign: () => log.push("resign"),
      },
      roles: {
        primary: (takeover) => {
          const p = new FakePrimary(log, takeover);
          primaries.push(p);
          return p;
        },
        standalone: () => new FakePrimary(log, undefined),
        standby: (kept) => {
          const s = new FakeStandby(log, kept);
          standbys.push(s);
          return s;
        },
      },
      timers: noTimers,
      defer: (fn) => microtasks.push(fn),
      observer: {},
      maintenancePaused: () => false,
      adoptMaintenance: () => undefined,
      deviceFailed: () => undefined,
    },
  );
  const drain = () => {
    while (microtasks.length > 0) microtasks.shift()!();
  };
  return { log, driver, drain, standbys, primaries };
}

describe("NodeDriver", () => {
  it("a cold pair: the epoch is persisted before the primary is built; start's callback fires", () => {
    const { log, driver } = rig("peer", undefined);
    let decided = 0;
    driver.start(0, () => decided++);
    expect(log).toEqual(["persist 1", "stop standby: role decided", "start primary"]);
    expect(decided).toBe(1);
    expect(driver.current.kind).toBe("primary");
  });

  it("etcd mode: acquire, then persist, then serve", () => {
    const { log, driver } = rig("etcd", undefined);
    driver.start(0);
    expect(log).toEqual(["acquire 1", "persist 1", "stop standby: role decided", "start primary"]);
  });

  it("promotion runs after the asking callback: persist, stop the standby, primary from its replica, parked guests", () => {
    const peerPrimary: PeerView = {
      nodeId: "b",
      role: "primary",
      epoch: 2,
      replica: false,
      appliedSeq: 5,
    };
    const { log, driver, drain, standbys, primaries } = rig("peer", peerPrimary);
    driver.start(2);
    expect(driver.current.kind).toBe("standby");
    const standby = standbys.at(-1)!;
    standby.serveGuest("guest-1");
    log.length = 0;
    driver.promote("lease_expired");
    expect(log).toEqual([]); // deferred
    drain();
    expect(log).toEqual(["persist 5", "stop standby: promoted", "start primary from replica@7"]);
    expect(primaries.at(-1)!.served).toEqual(["guest-1"]);
    expect(driver.epoch()).toBe(5);
  });

  it("step-down after a handover: stop, resign, a standby keeping the state, the old primary told last", () => {
    const { log, driver, drain, primaries } = rig("etcd", undefined);
    driver.start(0);
    const primary = primaries.at(-1)!;
    primary.handed = "state@9";
    log.length = 0;
    driver.stepDown(3, "handed over");
    drain();
    expect(log).toEqual([
      "persist 3",
      "stop primary: stepping down: handed over",
      "resign",
      "start standby keeping state@9",
      "told primary it stepped down",
    ]);
  });

  it("a stopped node changes no role", () => {
    const { log, driver, drain } = rig("peer", undefined);
    driver.start(0);
    driver.stop("node shutting down");
    log.length = 0;
    driver.stepDown(9, "late");
    drain();
    expect(log).toEqual([]);
  });
});
