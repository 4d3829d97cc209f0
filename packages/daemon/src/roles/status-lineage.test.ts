// Proves the `lineage` field of /v1/status on the roles that ship (not started: no port opens):
// a primary that starts a history shows the new id it made, one that took a standby's replica
// over shows that replica's; a standby shows null until it holds a replica, then the replica's.
import { Writable } from "node:stream";
import {
  createLogger,
  createMetrics,
  type NodeGauges,
  parseConfig,
  type Supervisor,
  systemClock,
} from "@vgpu-ha/common";
import { Backend } from "@vgpu-ha/gpu-model";
import { afterEach, describe, expect, it } from "vitest";
import type { ReplicationRefusals } from "../replication-refusals.js";
import { backendOptions } from "./backend-options.js";
import { PrimaryRole } from "./primary-role.js";
import type { Role, RoleDeps } from "./role.js";
import { StandbyRole } from "./standby-role.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function deps(role: "standalone" | "standby"): RoleDeps {
  const config = parseConfig({ nodeId: "n", role, peer: { name: "peer" } });
  const discard = new Writable({ write: (_chunk, _encoding, done) => done() });
  return {
    config,
    logger: createLogger({ level: "silent", nodeId: "n", destination: discard }),
    metrics: createMetrics({} as NodeGauges, { processMetrics: false }),
    clock: systemClock,
    // Not started, the roles only read the epoch.
    supervisor: { epoch: () => 1 } as Supervisor,
    arbiter: undefined,
    refusals: {} as ReplicationRefusals,
  };
}

const lineageOf = (role: Role) => role.status().lineage;

let roles: Role[] = [];
afterEach(async () => {
  for (const r of roles) await r.stop("test over");
  roles = [];
});

describe("the lineage in /v1/status", () => {
  it("a primary that starts a history shows the id it made", () => {
    const role = new PrimaryRole(deps("standalone"));
    roles.push(role);
    expect(lineageOf(role)).toMatch(UUID);
    expect(lineageOf(role)).toBe(role.backend.lineage);
  });

  it("a primary that took a replica over shows the replica's (the history goes on)", () => {
    const d = deps("standalone");
    const backend = new Backend(backendOptions(d.config, false));
    backend.lineage = "history-x";
    const role = new PrimaryRole(d, { backend, lastSeq: 0 });
    roles.push(role);
    expect(lineageOf(role)).toBe("history-x");
  });

  it("a standby shows null until it holds a replica, then the replica's", () => {
    const d = deps("standby");
    const role = new StandbyRole(d);
    roles.push(role);
    expect(lineageOf(role)).toBeNull();
    const backend = new Backend(backendOptions(d.config, false));
    backend.lineage = "history-y";
    role.receiver.adopt(backend, 0);
    expect(lineageOf(role)).toBe("history-y");
  });
});
