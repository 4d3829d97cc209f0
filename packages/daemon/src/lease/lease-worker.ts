// The lease thread (a worker_threads Worker, one per node of a pair): sends the primary's
// heartbeats and answers them on the standby over UDP, beside the main event loop, so that
// guest traffic on the main loop cannot delay them. It renews only while the main loop turns
// (the watchdog) and wants renewal; it takes and answers a heartbeat only when it carries a
// valid tag under the key of the standby's current primary stream, that primary's epoch and a
// counter newer than any before (core/lease-channel.ts, lease-datagram.ts).
import { createSocket, type RemoteInfo } from "node:dgram";
import { parentPort, workerData } from "node:worker_threads";
// The pure rules only: the barrel would load grpc, pino and the rest into this thread.
import {
  LeaseDatagramKind,
  mayRenew,
  newestAckedMs,
  type StandbyChannelState,
  standbyTakes,
} from "@vgpu-ha/common/lease-channel";
import { decodeLeaseDatagram, encodeLeaseDatagram } from "./lease-datagram.js";
import {
  type LeaseRoleMessage,
  type LeaseWorkerData,
  monotonicUs,
  SLOT_COUNT,
  Slot,
} from "./lease-shared.js";
import type { EtcdWorker } from "./lease-worker-etcd.js";

const data = workerData as LeaseWorkerData;
const shared = new BigInt64Array(data.shared, 0, SLOT_COUNT);
const load = (slot: number) => Number(Atomics.load(shared, slot));
const store = (slot: number, value: number) =>
  Atomics.store(shared, slot, BigInt(Math.round(value)));
const bump = (slot: number) => Atomics.add(shared, slot, 1n);
const nowMs = () => Number(monotonicUs()) / 1000;

type Role =
  | { kind: "none" }
  | { kind: "primary"; key: Uint8Array; epoch: number; counter: number }
  | { kind: "standby"; key: Uint8Array; state: StandbyChannelState };
let role: Role = { kind: "none" };

const socket = createSocket({ type: data.bindHost.includes(":") ? "udp6" : "udp4" });

/** The main loop's view, read from shared memory. */
function view() {
  return {
    mainProgressMs: load(Slot.mainProgressUs) / 1000,
    renewing: load(Slot.renewing) === 1,
  };
}

// etcd mode only: its client (and grpc) is loaded only there.
const etcd: EtcdWorker | undefined =
  data.mode === "etcd"
    ? new (await import("./lease-worker-etcd.js")).EtcdWorker(data, {
        nowMs,
        view,
        setEndMs: (endMs) => store(Slot.etcdEndUs, endMs * 1000),
        answered: () => bump(Slot.etcdAnswers),
        post: (message) => parentPort?.postMessage(message),
      })
    : undefined;

function onRole(m: LeaseRoleMessage): void {
  if (m.kind === "close") {
    clearInterval(timer);
    if (data.mode === "peer") socket.close();
    etcd?.close();
    parentPort?.close();
    return;
  }
  if (m.kind === "etcd") {
    store(Slot.etcdEndUs, 0);
    etcd?.hold(m.leaseId);
    store(Slot.workerGeneration, m.generation);
    return;
  }
  if (m.kind === "primary") {
    store(Slot.ackedSentUs, 0);
    role = { kind: "primary", key: m.key, epoch: m.epoch, counter: 0 };
  } else if (m.kind === "standby") {
    // The same primary on a new stream keeps its key: keep the counter too (no replays).
    const same =
      role.kind === "standby" && sameKey(role.key, m.key) && role.state.epoch === m.epoch;
    if (!same) {
      store(Slot.heardUs, 0);
      role = { kind: "standby", key: m.key, state: { epoch: m.epoch, lastCounter: 0 } };
    }
  } else {
    store(Slot.ackedSentUs, 0);
    store(Slot.heardUs, 0);
    store(Slot.etcdEndUs, 0);
    etcd?.hold(undefined);
    role = { kind: "none" };
  }
  store(Slot.workerGeneration, m.generation);
}

function heartbeat(): void {
  if (role.kind !== "primary" || data.peerPort === undefined || data.peerHost === undefined) return;
  const now = nowMs();
  if (!mayRenew(now, view(), data.watchdogMs)) return;
  role.counter++;
  const hb = {
    kind: LeaseDatagramKind.heartbeat,
    epoch: role.epoch,
    counter: role.counter,
    sentMs: now,
  };
  socket.send(encodeLeaseDatagram(hb, role.key), data.peerPort, data.peerHost, () => undefined);
  bump(Slot.heartbeatsSent);
}

function onDatagram(bytes: Buffer, from: RemoteInfo): void {
  if (role.kind === "none") return void bump(Slot.refused);
  const d = decodeLeaseDatagram(bytes, role.key);
  if (d === undefined) return void bump(Slot.refused);
  const now = nowMs();
  if (role.kind === "standby" && d.kind === LeaseDatagramKind.heartbeat) {
    // Answer only while this node's own main loop turns: a hung standby must not keep its
    // primary leased (it could not take over, nor apply what the primary waits for).
    if (!standbyTakes(role.state, d) || now - view().mainProgressMs >= data.watchdogMs) {
      return void bump(Slot.refused);
    }
    role.state = { epoch: role.state.epoch, lastCounter: d.counter };
    store(Slot.heardUs, now * 1000); // recorded before the answer: see lease-channel.ts
    bump(Slot.heartbeatsTaken);
    const ack = { ...d, kind: LeaseDatagramKind.ack };
    socket.send(encodeLeaseDatagram(ack, role.key), from.port, from.address, () => undefined);
    return;
  }
  if (role.kind === "primary" && d.kind === LeaseDatagramKind.ack && d.epoch === role.epoch) {
    const before = load(Slot.ackedSentUs) / 1000;
    store(Slot.ackedSentUs, newestAckedMs(before, d.sentMs, now) * 1000);
    bump(Slot.acksTaken);
    return;
  }
  bump(Slot.refused);
}

function sameKey(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

parentPort?.on("message", onRole);
const timer = setInterval(heartbeat, data.heartbeatMs);
if (data.mode === "peer") {
  socket.on("message", onDatagram);
  socket.on("error", (e) => parentPort?.postMessage({ kind: "error", message: e.message }));
  socket.bind(data.bindPort, data.bindHost, () => {
    store(Slot.up, 1);
    parentPort?.postMessage({ kind: "up" });
  });
} else {
  store(Slot.up, 1);
  parentPort?.postMessage({ kind: "up" });
}
