// Runs one attack against a pair under the normal guest's load and judges it: no epoch change
// (but the one a forced promote is for), the normal guest's results all correct, nothing
// acknowledged lost, progress during the attack, the attacked node's memory bounded, and the
// refusal counted and logged. Ratios of throughput are reported, never judged.
import type { AttackOutcome } from "./attacks/outcome.js";
import type { AttackContext, AttackDef, PairNode } from "./catalogue.js";
import { type GuestCredentials, type GuestVerdict, NormalGuest } from "./normal-guest.js";
import { type Observation, Observer } from "./observe.js";

/** Growth of the attacked node's resident memory over the attack that still counts as bounded. */
export const RSS_GROWTH_MAX_MB = 512;

export interface AttackResult {
  readonly name: string;
  readonly at: string;
  readonly port: string;
  readonly epochChanges: number;
  readonly expectedEpochChanges: number;
  readonly guestRatio: number | null;
  readonly lostAcked: number | null;
  readonly peakRssMb: number | null;
  readonly refusalsCounted: number | null;
  readonly refusalMetrics: readonly string[];
  readonly durationS: number;
  readonly outcome: AttackOutcome | null;
  readonly observation: Observation;
  /** The normal guest's verdict (null: none ran, as against an operator's pair). */
  readonly guest: GuestVerdict | null;
  /** Every check that failed, in words (empty: the pair held). */
  readonly failures: string[];
}

export interface ExecuteOptions {
  readonly nodes: readonly PairNode[];
  /** The normal guest's credentials; none runs without them. */
  readonly guest?: GuestCredentials;
  /** Calm measured before the attack (the ratio's denominator). */
  readonly beforeMs: number;
  readonly seed: number;
}

export async function execute(
  def: AttackDef,
  ctx: AttackContext,
  options: ExecuteOptions,
): Promise<AttackResult> {
  const observer = new Observer(
    options.nodes.map((n) => ({ name: n.id, opsUrl: n.opsUrl, pid: n.pid, logFile: n.logFile })),
    { name: ctx.node.id, opsUrl: ctx.node.opsUrl, pid: ctx.node.pid, logFile: ctx.node.logFile },
    def.refusalMetrics,
  );
  const guest = options.guest ? new NormalGuest(options.guest, options.seed) : undefined;
  await guest?.start(options.beforeMs);
  await observer.start();
  guest?.mark();
  const started = performance.now();
  let outcome: AttackOutcome | null = null;
  let attackError: string | undefined;
  try {
    outcome = await def.run(ctx);
  } catch (e) {
    attackError = (e as Error).message;
  }
  guest?.mark();
  const durationS = (performance.now() - started) / 1000;
  const observation = await observer.stop();
  const verdict = guest ? await guest.stop() : null;
  const failures = judge(def, outcome, observation, verdict);
  if (attackError) failures.unshift(`the attack tool failed: ${attackError}`);
  return {
    name: def.name,
    at: `${def.at} (${ctx.node.id})`,
    port: def.port,
    epochChanges: observation.epochChanges,
    expectedEpochChanges: def.expectedEpochChanges,
    guestRatio: verdict?.guestRatio ?? null,
    lostAcked: verdict?.lostAcked ?? null,
    peakRssMb: observation.peakRssMb,
    refusalsCounted: observation.refusalsCounted,
    refusalMetrics: def.refusalMetrics,
    durationS,
    outcome,
    observation,
    guest: verdict,
    failures,
  };
}

function judgeGuest(g: GuestVerdict): string[] {
  const f: string[] = [];
  if (g.error) f.push(`the normal guest failed: ${g.error}`);
  if (g.wrongResults.length > 0)
    f.push(`${g.wrongResults.length} wrong results: ${g.wrongResults[0]}`);
  if (g.lostAcked !== 0) f.push(`${g.lostAcked ?? "?"} acknowledged increments lost`);
  if (g.acksDuring === 0) f.push("the normal guest made no progress during the attack");
  return f;
}

function judge(
  def: AttackDef,
  outcome: AttackOutcome | null,
  o: Observation,
  g: GuestVerdict | null,
): string[] {
  const f: string[] = [];
  if (o.epochChanges !== def.expectedEpochChanges) {
    f.push(
      `${o.epochChanges} epoch changes, want ${def.expectedEpochChanges} (${o.rolesBefore.join(", ")} → ${o.rolesAfter.join(", ")})`,
    );
  }
  if (g) f.push(...judgeGuest(g));
  if (
    o.peakRssMb !== null &&
    o.rssBeforeMb !== null &&
    o.peakRssMb - o.rssBeforeMb > RSS_GROWTH_MAX_MB
  ) {
    f.push(
      `resident memory grew ${(o.peakRssMb - o.rssBeforeMb).toFixed(0)} MiB (bound ${RSS_GROWTH_MAX_MB})`,
    );
  }
  if (def.refusalMetrics.length > 0) {
    if (!(o.refusalsCounted !== null && o.refusalsCounted > 0)) {
      f.push(`not counted: ${def.refusalMetrics.join(" + ")} rose by ${o.refusalsCounted ?? "?"}`);
    }
    if (def.logged !== false && o.refusalLogLines === 0) {
      f.push("not logged: no log line names a refusal");
    }
  }
  if (outcome && def.check) f.push(...def.check(outcome));
  return f;
}
