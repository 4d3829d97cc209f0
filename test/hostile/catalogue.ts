// Every attack of the harness: which port of which node it aims at, which of the node's
// counters must count it, how many epoch changes it may cause (0, except a forced promote),
// and how to run it at the harness's scale ("full": the figures of issue 12) or the test's
// ("short": the same attacks, smaller and shorter, for npm test on a shared machine).
import { ExitCode } from "@vgpu-ha/client/exit-codes";
import { crossedPair } from "./attacks/crossed-pair.js";
import { garbage } from "./attacks/garbage.js";
import { hostileTenant } from "./attacks/hostile-tenant.js";
import { incompleteMessagesAttack } from "./attacks/incomplete-messages.js";
import type { AttackerTls, AttackOutcome } from "./attacks/outcome.js";
import { sleep } from "./attacks/outcome.js";
import { promote } from "./attacks/promote.js";
import { rapidReset } from "./attacks/rapid-reset.js";
import { abandonSessions, manySessions } from "./attacks/sessions.js";
import { silentStreams } from "./attacks/silent-streams.js";
import { slowloris } from "./attacks/slowloris.js";
import { type HelloKind, strayHellos } from "./attacks/stray-hello.js";

export type Scale = "full" | "short";
export type Which = "primary" | "standby";

/** One node of the attacked pair, as the attacks see it. */
export interface PairNode {
  readonly id: string;
  /** Its peer.name (what a copy of the pair would send as node id). */
  readonly peerName: string;
  readonly guest: string;
  readonly replication: string;
  readonly opsUrl: string;
  readonly pid?: number;
  readonly logFile?: string;
}

export interface AttackContext {
  readonly scale: Scale;
  readonly clusterId: string;
  readonly adminToken: string;
  /** The attacked node, and the other one. */
  readonly node: PairNode;
  readonly other: PairNode;
  readonly epoch: number;
  /** Tenant the session attacks use (its own, so the normal guest's quota is untouched). */
  readonly sessionTenant: { name: string; token: string };
  /** The hostile tenant (small quotas) of the hostile-tenant attack. */
  readonly hostileTenant: { name: string; token: string };
  /** The pair's idle timeout (guest.sessionIdleSeconds), when this vgpud has one. */
  readonly sessionIdleSeconds: number | undefined;
  /** TLS material of a copy of the pair: a certificate of the pair's CA per node name. */
  readonly attackerTls?: (peerName: string) => AttackerTls;
}

export interface AttackDef {
  readonly name: string;
  readonly at: Which;
  readonly port: "guest" | "replication" | "ops";
  /** Counters (summed) that must rise by what the attack tried; none: nothing to refuse. */
  readonly refusalMetrics: readonly string[];
  readonly expectedEpochChanges: number;
  /** Whether the node must also name the refusal in its log (default: when it counts one). */
  readonly logged?: boolean;
  /** Whether the pair runs replication over TLS for it. */
  readonly tls: boolean;
  run(ctx: AttackContext): Promise<AttackOutcome>;
  /** What the attacker must have seen (a refusal, sessions that opened…); failures in words. */
  check?(outcome: AttackOutcome): string[];
}

const expectAnswer = (key: string, want: number) => (o: AttackOutcome) =>
  (o.answers[key] ?? 0) === want ? [] : [`${key}: ${o.answers[key] ?? 0}, want ${want}`];

const REPLICATION_REFUSALS = ["vgpu_replication_refusals_total", "vgpu_tls_refusals_total"];
const GUEST_REFUSALS = ["vgpu_guest_refusals_total"];

/** An attack on the primary's guest port, refused by the guest listener, by default. */
const attack = (d: Pick<AttackDef, "name" | "run"> & Partial<AttackDef>): AttackDef => ({
  at: "primary",
  port: "guest",
  refusalMetrics: GUEST_REFUSALS,
  expectedEpochChanges: 0,
  tls: false,
  ...d,
});

const hello = (kind: HelloKind, at: Which, tls: boolean): AttackDef =>
  attack({
    name: `hello-${kind}${tls ? "-tls" : ""}@${at}`,
    at,
    port: "replication",
    refusalMetrics: REPLICATION_REFUSALS,
    tls,
    run: (c) =>
      strayHellos({
        target: c.node.replication,
        kind,
        clusterId: c.clusterId,
        epoch: c.epoch,
        peerName: c.node.peerName,
        count: c.scale === "full" ? 20 : 2,
        ...(tls && c.attackerTls ? { tls: c.attackerTls(c.node.peerName) } : {}),
      }),
  });

const HELLO_KINDS: readonly HelloKind[] = ["other-cluster", "wrong-node", "higher-epoch"];

export function helloAttacks(tls: boolean): AttackDef[] {
  return HELLO_KINDS.flatMap((k) => [hello(k, "primary", tls), hello(k, "standby", tls)]);
}

const rapid = (connections: number): AttackDef =>
  attack({
    name: `rapid-reset-${connections}`,
    run: (c) =>
      rapidReset({
        target: c.node.guest,
        connections,
        durationMs: c.scale === "full" ? 20_000 : 4000,
      }),
  });

/** What an abandoned session costs until reaped: wait for the reaper, then open as many again. */
async function abandonAndReopen(c: AttackContext): Promise<AttackOutcome> {
  const count = 300;
  const tenant = {
    target: c.node.guest,
    tenant: c.sessionTenant.name,
    token: c.sessionTenant.token,
  };
  const abandoned = await abandonSessions({ ...tenant, count });
  if (c.sessionIdleSeconds === undefined) {
    return {
      ...abandoned,
      note: `${abandoned.note}; this vgpud has no guest.sessionIdleSeconds: nothing will reap them`,
    };
  }
  // The reaper closes them some time after the idle timeout; then the tenant opens 300 again
  // (with the pair's maxSessionsPerTenant of 400 that fails while the 300 are still there).
  const reapedBy = performance.now() + (c.sessionIdleSeconds * 2 + 30) * 1000;
  let status = { sessions: Number.POSITIVE_INFINITY };
  const baseline = abandoned.answers.opened ?? 0;
  const start = await sessionsOf(c.node);
  while (performance.now() < reapedBy) {
    status = { sessions: await sessionsOf(c.node) };
    if (status.sessions <= start - baseline) break;
    await sleep(500);
  }
  const again = await manySessions({ ...tenant, count });
  return {
    sent: { ...abandoned.sent, "session opens after the timeout": count },
    answers: {
      ...abandoned.answers,
      ...Object.fromEntries(Object.entries(again.answers).map(([k, v]) => [`again: ${k}`, v])),
    },
    note: `${abandoned.note}; sessions on the node ${start} → ${status.sessions}; then ${again.note}`,
  };
}

async function sessionsOf(n: PairNode): Promise<number> {
  try {
    const res = await fetch(`${n.opsUrl}/v1/status`, { signal: AbortSignal.timeout(2000) });
    return ((await res.json()) as { sessions: number }).sessions;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** The attacks of one pair without TLS, in the order they run (a forced promote last). */
export function plaintextAttacks(): AttackDef[] {
  return [
    ...helloAttacks(false),
    attack({
      name: "crossed-pair",
      at: "standby",
      port: "replication",
      refusalMetrics: REPLICATION_REFUSALS,
      run: (c) =>
        crossedPair({
          // The copy's first node (configured primary) dials the attacked standby.
          targets: [c.other.replication, c.node.replication],
          names: [c.other.id, c.node.id],
          clusterId: c.clusterId,
          durationMs: c.scale === "full" ? 10_000 : 3000,
        }),
    }),
    // Before the rapid resets: the penalty they earn the attacker's address would refuse its
    // connections at accept, and the bound would not be reached.
    attack({
      name: "incomplete-messages",
      // Every stream must be reset by the bound, none left holding what it sent.
      check: (o) => [
        ...((o.answers["still open, all sent"] ?? 0) === 0
          ? []
          : [`${o.answers["still open, all sent"]} streams held all they sent`]),
        ...((o.answers["reset ENHANCE_YOUR_CALM"] ?? 0) === o.sent.streams
          ? []
          : [`${o.answers["reset ENHANCE_YOUR_CALM"] ?? 0} of ${o.sent.streams} streams reset`]),
      ],
      run: (c) =>
        incompleteMessagesAttack({
          target: c.node.guest,
          streams: c.scale === "full" ? 24 : 8,
          connections: c.scale === "full" ? 4 : 2,
          sendBytes: (c.scale === "full" ? 32 : 16) * 1024 ** 2,
          holdMs: c.scale === "full" ? 5000 : 2000,
        }),
    }),
    rapid(4),
    rapid(16),
    attack({
      name: "silent-streams",
      run: (c) =>
        silentStreams({
          target: c.node.guest,
          connections: 100,
          streams: 100,
          holdMs: c.scale === "full" ? 15_000 : 12_000,
        }),
    }),
    attack({
      name: "garbage",
      run: (c) =>
        garbage({
          target: c.node.guest,
          connections: c.scale === "full" ? 2000 : 500,
          concurrency: 50,
          bytes: 4096,
          seed: 12,
        }),
    }),
    attack({
      name: "slowloris-ops",
      port: "ops",
      refusalMetrics: [],
      check: (o) =>
        Object.keys(o.answers).some((k) => k.startsWith("well-behaved client: no answer"))
          ? ["the ops port did not answer a well-behaved client during the attack"]
          : [],
      run: (c) =>
        slowloris({
          target: c.node.opsUrl.replace(/^https?:\/\//, ""),
          connections: c.scale === "full" ? 500 : 200,
          durationMs: c.scale === "full" ? 15_000 : 4000,
          lineEveryMs: 1000,
        }),
    }),
    attack({
      name: "sessions-abandoned",
      refusalMetrics: ["vgpu_sessions_reaped_total"],
      check: expectAnswer("again: opened", 300),
      run: abandonAndReopen,
    }),
    attack({
      name: "sessions-400",
      refusalMetrics: [],
      check: expectAnswer("opened", 400),
      run: (c) =>
        manySessions({
          target: c.node.guest,
          tenant: c.sessionTenant.name,
          token: c.sessionTenant.token,
          count: 400,
        }),
    }),
    attack({
      name: "hostile-tenant",
      // A tenant's refused frames are answered and counted, not logged one by one.
      logged: false,
      refusalMetrics: ["vgpu_refusal_throttles_total"],
      check: (o) => [
        ...((o.answers.QUOTA_EXCEEDED ?? 0) > 0
          ? []
          : ["the hostile tenant was never refused its quota"]),
        ...expectAnswer("OK", 4)(o),
      ],
      run: (c) =>
        hostileTenant({
          target: c.node.guest,
          tenant: c.hostileTenant.name,
          token: c.hostileTenant.token,
          durationMs: c.scale === "full" ? 10_000 : 3000,
        }),
    }),
    promoteAttack(false),
    promoteAttack(true),
  ];
}

function promoteAttack(force: boolean): AttackDef {
  return attack({
    name: force ? "promote-force" : "promote",
    at: "standby",
    port: "ops",
    refusalMetrics: [],
    expectedEpochChanges: force ? 1 : 0,
    // Unforced on a healthy pair: refused, PRIMARY_LEASED (vgpuctl exit 11).
    check: expectAnswer(`exit ${force ? ExitCode.ok : ExitCode.primaryLeased}`, 1),
    run: (c) => promote({ nodes: [c.node.opsUrl, c.other.opsUrl], token: c.adminToken, force }),
  });
}

/** Every attack by name, for --attack. */
export function allAttacks(): AttackDef[] {
  return [...plaintextAttacks(), ...helloAttacks(true)];
}
