// The planted bugs of `npm run mutants` (see mutant.ts and docs/development.md#mutants). Each is
// one edit of shipped code under packages/; the simulator and the scenario files must kill it.
// When code moves, re-aim the mutant: point `file` at the new place and copy the line exactly
// (with its indentation). An anchor that does not stand exactly once as whole lines fails the
// run: a stale mutant is a defect, never a pass.
import type { Mutant } from "./mutant.js";

const primaryMachine = "packages/primary/src/core/primary-machine.ts";
const primaryDriver = "packages/primary/src/primary-driver.ts";
const standbyMachine = "packages/standby/src/core/standby-machine.ts";
const nodeMachine = "packages/common/src/core/node-machine.ts";
const receiver = "packages/standby/src/core/receiver.ts";
const release = "packages/common/src/core/release.ts";
const standbyDriver = "packages/standby/src/standby-driver.ts";

export const MUTANTS: readonly Mutant[] = [
  {
    name: "release-all",
    what: "the primary releases every reply whatever its lease and its standby hold",
    file: primaryMachine,
    original: "    return seq === RELEASE_ALL ? undefined : seq;",
    replacement: "    return undefined;",
  },
  {
    name: "fenced-answers",
    what: "peer mode: a primary whose lease lapsed (fenced) keeps releasing replies as if leased",
    file: primaryMachine,
    original: '    let lease: PrimaryLease = lapsed ? "fenced" : this.lease;',
    replacement:
      '    let lease: PrimaryLease = lapsed || this.lease === "fenced" ? "leased" : this.lease;',
  },
  {
    name: "etcd-fenced-answers",
    what: "etcd mode: a primary without its etcd lease keeps releasing replies",
    file: primaryMachine,
    original: '    if (f.etcd) lease = f.nowMs < f.etcd.leaseEndMs ? "leased" : "fenced";',
    replacement: '    if (f.etcd) lease = "leased";',
  },
  {
    name: "promote-ineligible",
    what: "a standby counts as eligible whatever its state (empty, mid-snapshot, diverged, no grant)",
    file: receiver,
    original: '    return this.state === "replica" && this.granted;',
    replacement: "    return true;",
  },
  {
    name: "etcd-promote-ineligible",
    what: "etcd mode: a standby claims the granted replica to take the leader key, eligible or not",
    file: standbyMachine,
    original: "    const mine: Holding = facts.eligible",
    replacement: "    const mine: Holding = true || facts.eligible",
  },
  {
    name: "promote-unpersisted",
    what: "a promoted node serves its new epoch without persisting it first",
    file: nodeMachine,
    original: "      ...this.persist(epoch), // persisted before serving as primary",
    replacement: "      ...((this.epoch = epoch), []), // not persisted",
  },
  {
    name: "stepdown-keeps-state",
    what: "a primary stepping down keeps its state as a replica without a completed handover",
    file: primaryDriver,
    original: "    if (lastSeq === undefined || lastSeq !== this.log.lastSeq) return undefined;",
    replacement:
      "    if (lastSeq === undefined || lastSeq !== this.log.lastSeq) return { backend: this.backend, lastSeq: this.log.lastSeq };",
  },
  {
    name: "apply-out-of-order",
    what: "the standby applies an entry past a gap instead of asking for the missing ones",
    file: receiver,
    original: "      if (entry.seq !== this.receivedSeq + 1) {",
    replacement: "      if (entry.seq < this.receivedSeq) {",
  },
  {
    name: "met-primary-ignored",
    what: "a primary dialled by a primary of a higher epoch keeps serving instead of stepping down",
    file: primaryMachine,
    original: "    if (otherPrimaryWins({ epoch, nodeId: this.options.identity.nodeId }, m)) {",
    replacement:
      "    if (otherPrimaryWins({ epoch, nodeId: this.options.identity.nodeId }, m) && m.epoch < 0) {",
  },
  {
    name: "sync-before-receipt",
    what: "sync mode releases a granted standby's replies before it received their entries",
    file: release,
    original: '  return mode === "sync" ? ack.receivedSeq : ack.appliedSeq;',
    replacement: '  return mode === "sync" ? Number.POSITIVE_INFINITY : ack.appliedSeq;',
  },
  {
    name: "sync-applied-on-receipt",
    what: "sync-applied mode releases replies once the standby received them, not applied them",
    file: release,
    original: '  return mode === "sync" ? ack.receivedSeq : ack.appliedSeq;',
    replacement: "  return ack.receivedSeq;",
  },
  {
    name: "release-before-device",
    what: "a reply leaves before the primary's own device completed its entry",
    file: release,
    original: "  return Math.min(v.deviceSeq ?? RELEASE_ALL, replicatedSeq(v));",
    replacement: "  return replicatedSeq(v);",
  },
  {
    name: "promote-with-backlog",
    what: "a standby takes over before its device applied the whole received backlog",
    file: standbyMachine,
    original: "    if (facts.backlog === 0) {",
    replacement: "    if (facts.backlog >= 0) {",
  },
  {
    name: "acks-while-awaiting-backlog",
    what: "a standby waiting for its backlog before taking over still acknowledges the old primary (renewing its lease)",
    file: standbyDriver,
    original: "      muted: () => this.machine.holdingTakeover,",
    replacement: "      muted: () => false,",
  },
  {
    name: "standby-applies-before-primary-done",
    what: "a holding standby hands entries to its device before the primary's device has done them (a hanging frame would run on both nodes at once)",
    file: receiver,
    original: "      if (this.holdingDevice && entry.seq > this.primaryDoneSeq) break;",
    replacement: "      if (this.holdingDevice && entry.seq > this.receivedSeq) break;",
  },
  {
    name: "standby-ignores-device-failure",
    what: "a standby does not watch its replica's device for a failure: a takeover waiting for that device's backlog waits for ever",
    file: standbyDriver,
    original: "    const unFailure = progress.onFailure((f) => this.deviceFailed(f));",
    replacement: "    const unFailure = () => undefined;",
  },
];
