// Proves the etcd acquisition rule and lease arithmetic: only the node holding the newest
// state (the record's primary with its state, or the replica the record names, granted by
// heartbeat yet or not) takes the key; when neither can hold it, an unnamed replica is the
// best state left, and only when no node holds anything does the configured primary start
// afresh; a silent peer the record names blocks everyone; epochs grow past both the record's
// and the node's own; terms are validated.
import { describe, expect, it } from "vitest";
import {
  type AcquireView,
  checkEtcdLeaseTerms,
  decodeLeader,
  decodeRecord,
  encodeLeader,
  encodeRecord,
  etcdLeaseEndMs,
  holdingOf,
  leaderKey,
  mayAcquire,
  recordKey,
} from "./etcd-lease.js";

const base: AcquireView = {
  me: "b",
  configuredPrimary: false,
  leaderPresent: false,
  record: { epoch: 4, primary: "a", replica: "b" },
  mine: "granted-replica",
  peer: undefined,
  localEpoch: 4,
};

describe("mayAcquire", () => {
  it.each<[string, Partial<AcquireView>, boolean | number, RegExp]>([
    ["the granted replica takes over", {}, 5, /granted replica/],
    ["never while the key is held", { leaderPresent: true }, false, /held/],
    ["epoch grows past the local one", { localEpoch: 9 }, 10, /granted/],
    [
      "a replica the record does not name waits",
      { record: { epoch: 4, primary: "a", replica: "" } },
      false,
      /waiting for a/,
    ],
    [
      "an ungranted replica waits for a silent primary",
      { mine: "nothing" },
      false,
      /waiting for a/,
    ],
    [
      "the last primary with its state re-takes the key",
      { me: "a", mine: "primary-state", record: { epoch: 4, primary: "a", replica: "" } },
      5,
      /last primary/,
    ],
    [
      "a restarted last primary waits for its granted peer",
      {
        me: "a",
        mine: "nothing",
        configuredPrimary: true,
        peer: { nodeId: "b", holds: "granted-replica" },
      },
      false,
      /waiting for b to take over/,
    ],
    [
      "the state is lost when both answer holding nothing: the configured primary starts",
      {
        me: "a",
        mine: "nothing",
        configuredPrimary: true,
        peer: { nodeId: "b", holds: "nothing" },
      },
      5,
      /afresh/,
    ],
    [
      "...but not the other node",
      { mine: "nothing", peer: { nodeId: "a", holds: "nothing" } },
      false,
      /configured primary/,
    ],
    [
      "a silent peer the record names blocks a fresh start",
      { me: "a", mine: "nothing", configuredPrimary: true, peer: undefined },
      false,
      /may hold/,
    ],
    [
      "the replica the record names takes over before the heartbeat's grant reached it",
      { mine: "replica" },
      5,
      /granted replica/,
    ],
    [
      "a restarted primary waits for the replica the record names, granted or not",
      {
        me: "a",
        mine: "nothing",
        configuredPrimary: true,
        peer: { nodeId: "b", holds: "replica" },
      },
      false,
      /waiting for b to take over/,
    ],
    [
      "the best state left: an unnamed replica takes over when the primary answers empty",
      {
        record: { epoch: 4, primary: "a", replica: "" },
        mine: "replica",
        peer: { nodeId: "a", holds: "nothing" },
      },
      5,
      /best state left/,
    ],
    [
      "a node holding nothing never starts afresh over a peer's replica",
      {
        me: "a",
        mine: "nothing",
        configuredPrimary: true,
        record: { epoch: 4, primary: "a", replica: "" },
        peer: { nodeId: "b", holds: "replica" },
      },
      false,
      /holds a replica/,
    ],
    [
      "a restarted last primary never starts afresh before its peer answered",
      {
        me: "a",
        mine: "nothing",
        configuredPrimary: true,
        record: { epoch: 4, primary: "a", replica: "" },
        peer: undefined,
      },
      false,
      /may hold a replica/,
    ],
    [
      "cold start: the configured primary",
      { record: undefined, mine: "nothing", configuredPrimary: true },
      5,
      /cold start/,
    ],
    [
      "cold start: the other waits",
      { record: undefined, mine: "nothing" },
      false,
      /configured primary/,
    ],
  ])("%s", (_, change, expected, why) => {
    const d = mayAcquire({ ...base, ...change });
    expect(d.reason).toMatch(why);
    if (expected === false) expect(d.acquire).toBe(false);
    else expect(d).toMatchObject({ acquire: true, epoch: expected });
  });
});

describe("etcd lease terms and arithmetic", () => {
  const t = { ttlMs: 2000, keepaliveMs: 500, driftMarginMs: 50, maxDriftRatio: 0.01 };
  it("accepts the defaults", () => expect(checkEtcdLeaseTerms(t)).toBeNull());
  it.each([
    [{ ...t, keepaliveMs: 700 }, /third/],
    [{ ...t, driftMarginMs: 30 }, /below 40 ms/],
    [{ ...t, ttlMs: 2000, keepaliveMs: 100, driftMarginMs: 1950 }, /no lease/],
  ])("refuses %j", (terms, why) => expect(checkEtcdLeaseTerms(terms)).toMatch(why));
  it("ends the lease the margin before the TTL counted from the keepalive's send time", () => {
    expect(etcdLeaseEndMs(1000, 2000, 50)).toBe(2950);
  });
});

describe("keys and values", () => {
  it("names keys under the prefix and cluster", () => {
    expect(leaderKey("/vgpu-ha/", "c1")).toBe("/vgpu-ha/c1/leader");
    expect(recordKey("/vgpu-ha", "c1")).toBe("/vgpu-ha/c1/record");
  });
  it("round-trips and refuses garbage", () => {
    const r = { epoch: 3, primary: "a", replica: "b" };
    expect(decodeRecord(encodeRecord(r))).toEqual(r);
    const l = { nodeId: "a", epoch: 3, guestAddress: "10.0.0.1:7000" };
    expect(decodeLeader(encodeLeader(l))).toEqual(l);
    for (const bad of [
      "",
      "{",
      "[]",
      '{"epoch":"3","primary":"a","replica":""}',
      '{"epoch":1.5,"primary":"a","replica":""}',
    ]) {
      expect(decodeRecord(bad)).toBeUndefined();
    }
    expect(decodeLeader('{"nodeId":1}')).toBeUndefined();
  });
});

describe("holdingOf", () => {
  it("reads a probe: a primary holds its state, a standby a granted replica, an ungranted one or nothing", () => {
    const standby = { role: "standby" as const, replica: false, appliedSeq: 0 };
    expect(holdingOf({ ...standby, role: "primary" })).toBe("primary-state");
    expect(holdingOf({ ...standby, replica: true, appliedSeq: 9 })).toBe("granted-replica");
    expect(holdingOf({ ...standby, appliedSeq: 9 })).toBe("replica");
    expect(holdingOf(standby)).toBe("nothing");
  });

  it("a peer's ungranted replica keeps the configured primary from starting afresh", () => {
    const view = (peerAppliedSeq: number): AcquireView => ({
      me: "a",
      configuredPrimary: true,
      leaderPresent: false,
      record: { epoch: 1, primary: "a", replica: "" },
      mine: "nothing",
      peer: {
        nodeId: "b",
        holds: holdingOf({ role: "standby", replica: false, appliedSeq: peerAppliedSeq }),
      },
      localEpoch: 1,
    });
    expect(mayAcquire(view(7)).acquire).toBe(false);
    expect(mayAcquire(view(0)).acquire).toBe(true);
  });
});
