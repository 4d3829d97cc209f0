// Proves (short form of `npm run hostile`) that nothing from outside the cluster costs a real
// pair its state or its primary: each attack of test/hostile runs against a pair under a
// normal guest's load, and each case asserts what holds on a busy machine — no epoch change
// (one for a forced promote), the normal guest's results all correct, nothing acknowledged
// lost and progress during the attack, the attacked node's memory bounded, the refusal counted
// and logged, and what the attacker must see (a refused promote, sessions that open). The
// throughput ratios are printed here and judged only in npm run hostile's report.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AttackDef,
  helloAttacks,
  type PairNode,
  plaintextAttacks,
} from "../hostile/catalogue.js";
import { type AttackResult, execute } from "../hostile/execute.js";
import { hostilePairConfig, NORMAL_TENANT } from "../hostile/pair-config.js";
import { contextFor } from "../hostile/pair-view.js";
import { makeCerts } from "../support/certs.js";
import { FailoverPair, type NodeName } from "../support/failover-pair.js";

const CLUSTER = "failover-test"; // FailoverPair's cluster id

function nodesOf(pair: FailoverPair): [PairNode, PairNode] {
  const view = (n: NodeName): PairNode => {
    const c = pair.config(n) as {
      nodeId: string;
      peer: { name: string };
      guest: { listen: string };
      replication: { listen: string };
    };
    const spawned = pair.node(n);
    return {
      id: c.nodeId,
      peerName: c.peer.name,
      guest: c.guest.listen,
      replication: c.replication.listen,
      opsUrl: spawned.ops,
      pid: spawned.pid,
      logFile: spawned.logFile,
    };
  };
  return [view("a"), view("b")];
}

function line(r: AttackResult): string {
  const ratio = r.guestRatio === null ? "-" : r.guestRatio.toFixed(2);
  return `${r.name}: epochs ${r.epochChanges}, guest ratio ${ratio}, lost ${r.lostAcked}, peak RSS ${r.peakRssMb?.toFixed(0)} MiB, refusals ${r.refusalsCounted}; ${r.outcome?.note ?? ""} ${JSON.stringify(r.outcome?.answers ?? {})}`;
}

function attackCases(
  defs: AttackDef[],
  pair: () => FailoverPair,
  attackerTls?: () => (peer: string) => {
    ca: string;
    cert: string;
    key: string;
    serverName: string;
  },
) {
  for (const def of defs) {
    it(`${def.name}: the pair keeps its state and its primary`, { timeout: 120_000 }, async () => {
      const p = pair();
      const nodes = nodesOf(p);
      const ctx = await contextFor(def, nodes, {
        scale: "short",
        clusterId: CLUSTER,
        ...(attackerTls ? { attackerTls: attackerTls() } : {}),
      });
      const result = await execute(def, ctx, {
        nodes,
        guest: { endpoints: p.endpoints, tenant: NORMAL_TENANT.name, token: NORMAL_TENANT.token },
        beforeMs: 500,
        seed: 4242,
      });
      console.log(line(result));
      expect(result.failures).toEqual([]);
    });
  }
}

describe("hostile input against a pair without TLS", () => {
  let pair: FailoverPair;
  beforeAll(async () => {
    pair = await FailoverPair.create(hostilePairConfig());
  });
  afterAll(async () => {
    await pair?.cleanup();
  });
  attackCases(plaintextAttacks(), () => pair);
});

describe("stray hellos against a pair with mutual TLS, from a copy of the pair (same CA, names)", () => {
  let pair: FailoverPair;
  let certDir: string;
  beforeAll(async () => {
    certDir = mkdtempSync(join(tmpdir(), "vgpu-hostile-certs-"));
    const certs = makeCerts(certDir, "a", "b");
    pair = await FailoverPair.create(hostilePairConfig(), async ([a, b]) => {
      a.tls = certs.a;
      b.tls = certs.b;
    });
  });
  afterAll(async () => {
    await pair?.cleanup();
    rmSync(certDir, { recursive: true, force: true });
  });
  attackCases(
    helloAttacks(true),
    () => pair,
    () => (peer: string) => ({
      ca: join(certDir, "ca.crt"),
      cert: join(certDir, `${peer}.crt`),
      key: join(certDir, `${peer}.key`),
      // The attacker dials the node whose peer is `peer`: the other name.
      serverName: peer === "a" ? "b" : "a",
    }),
  );
});
