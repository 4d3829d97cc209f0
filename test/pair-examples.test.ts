// Proves deploy/examples/host-a.yaml and host-b.yaml are the two halves of one pair, checked on
// the loaded (validated) configs: the relations docs/configuration.md says are not checked at
// start and break a pair at run time — each node's peer addresses are the other's listen
// addresses, one cluster, the same lease, tenants and VRAM, different node ids and seeds — plus
// what the systemd unit expects (stateDir is its StateDirectory, ops reachable by Prometheus).
import { fileURLToPath } from "node:url";
import { loadConfig } from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";

const load = (name: string) =>
  loadConfig({
    file: fileURLToPath(new URL(`../deploy/examples/${name}`, import.meta.url)),
    env: {},
  });
const a = load("host-a.yaml");
const b = load("host-b.yaml");

describe("deploy/examples: the two-host pair", () => {
  it("has one primary and one standby of one cluster", () => {
    expect([a.role, b.role]).toEqual(["primary", "standby"]);
    expect(a.clusterId).toBe(b.clusterId);
    expect(a.nodeId).not.toBe(b.nodeId);
    expect(a.peer.name).toBe(b.nodeId);
    expect(b.peer.name).toBe(a.nodeId);
  });

  it("points each node's peer at the other's listen addresses", () => {
    expect(a.peer.replicationAddress).toBe(b.replication.listen);
    expect(a.peer.guestAddress).toBe(b.guest.listen);
    expect(b.peer.replicationAddress).toBe(a.replication.listen);
    expect(b.peer.guestAddress).toBe(a.guest.listen);
  });

  it("uses one host address per node on every port", () => {
    for (const c of [a, b]) {
      const hosts = [c.guest.listen, c.replication.listen, c.ops.listen].map((x) =>
        x.slice(0, x.lastIndexOf(":")),
      );
      expect(new Set(hosts).size, c.nodeId).toBe(1);
      expect(hosts[0]).not.toBe("127.0.0.1");
    }
  });

  it("has the same lease, replication mode, tenants and VRAM, and different device seeds", () => {
    expect(a.lease).toEqual(b.lease);
    expect(a.lease.mode).toBe("peer");
    expect(a.replication.mode).toBe(b.replication.mode);
    expect(a.tenants).toEqual(b.tenants);
    expect(a.device.vramBytes).toBe(b.device.vramBytes);
    expect(a.device.seed).not.toBe(b.device.seed);
  });

  it("keeps the epoch in the systemd unit's state directory and no token in the file", () => {
    expect(a.stateDir).toBe("/var/lib/vgpu-ha");
    expect(b.stateDir).toBe("/var/lib/vgpu-ha");
    expect(a.ops.token).toBeUndefined();
    expect(b.ops.token).toBeUndefined();
  });
});
