// What each vgpuctl command does, given the nodes to talk to. Each returns its exit code;
// failures are thrown as CliError (see exit-codes.ts) and printed by main.ts.
import { CliError, ExitCode } from "./exit-codes.js";
import { renderDetails, renderTable, roundMs } from "./format.js";
import { waitReady } from "./operator-commands.js";
import type { NodeStatus, NodeView, OpsClient } from "./ops-client.js";

export interface Context {
  readonly clients: readonly OpsClient[];
  readonly json: boolean;
  /** Admin actions may wait for the peer (a switchover waits until the standby caught up). */
  readonly actionTimeoutMs: number;
  readonly out: (text: string) => void;
  /** stdout is a terminal: progress bars instead of plain lines. */
  readonly tty?: boolean;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const SWITCHOVER_POLL_MS = 100;
/** How long after the old primary handed over we wait to see the new one serve. */
const NEW_PRIMARY_WAIT_MS = 5_000;

const views = (ctx: Context) => Promise.all(ctx.clients.map((c) => c.view()));

/** The table and the lines under it (last role change, maintenance, resync). */
const render = (ctx: Context, vs: Awaited<ReturnType<typeof views>>) => {
  const details = renderDetails(vs, ctx.tty === true);
  return details ? `${renderTable(vs)}\n\n${details}` : renderTable(vs);
};

const jsonOf = (v: NodeView) =>
  "problem" in v
    ? { node: v.url, error: v.problem }
    : { node: v.url, ready: v.ready, status: v.status };

/** 3 if a node is unreachable, else 5 if one answered an error, else 0. */
export async function status(ctx: Context): Promise<ExitCode> {
  const vs = await views(ctx);
  ctx.out(ctx.json ? JSON.stringify(vs.map(jsonOf), null, 2) : render(ctx, vs));
  const codes = vs.map((v) => ("problem" in v ? v.exitCode : ExitCode.ok));
  if (codes.includes(ExitCode.unreachable)) return ExitCode.unreachable;
  return codes.some((c) => c !== ExitCode.ok) ? ExitCode.failure : ExitCode.ok;
}

/** Redraws until SIGINT (main.ts exits 0 on it). */
export async function watch(ctx: Context, intervalMs: number): Promise<never> {
  for (;;) {
    const vs = await views(ctx);
    if (ctx.json) {
      ctx.out(JSON.stringify({ at: new Date().toISOString(), nodes: vs.map(jsonOf) }));
    } else {
      const title = `vgpuctl watch: every ${intervalMs} ms, ${new Date().toLocaleTimeString()} (Ctrl-C to quit)`;
      ctx.out(`\x1b[H\x1b[2J${title}\n\n${render(ctx, vs)}`);
    }
    await sleep(intervalMs);
  }
}

interface Target {
  readonly client: OpsClient;
  readonly status: NodeStatus;
}

/**
 * The node to act on: the one given, or among several the one in `role` (the highest epoch if
 * two claim it). Unreachable nodes are fine as long as the one needed answers.
 */
export async function find(ctx: Context, role: "primary" | "standby"): Promise<Target> {
  const vs = await views(ctx);
  const reachable = vs.flatMap((v, i) =>
    "problem" in v ? [] : [{ client: ctx.clients[i]!, status: v.status }],
  );
  const failed = vs.flatMap((v) => ("problem" in v ? [v] : []));
  if (ctx.clients.length === 1) {
    if (reachable[0]) return reachable[0];
  } else {
    const hits = reachable.filter((t) => t.status.role === role);
    hits.sort((x, y) => y.status.epoch - x.status.epoch);
    if (hits[0]) return hits[0];
  }
  if (failed.length > 0) {
    const list = failed.map((v) => `${v.url}: ${v.problem}`).join("; ");
    const code = failed.some((v) => v.exitCode === ExitCode.unreachable)
      ? ExitCode.unreachable
      : ExitCode.failure;
    throw new CliError(code, `no ${role} found (${list})`);
  }
  const seen = reachable.map((t) => `${t.status.nodeId} is ${t.status.role}`).join(", ");
  throw new CliError(ExitCode.failure, `no ${role} among the nodes given (${seen})`);
}

const name = (t: Target) => `${t.status.nodeId} (${t.client.url})`;

export async function verify(ctx: Context): Promise<ExitCode> {
  const t = await find(ctx, "primary");
  const r = await t.client.admin("/v1/verify", ctx.actionTimeoutMs);
  const equal = r.equal === true;
  if (ctx.json) ctx.out(JSON.stringify(r));
  else if (equal) ctx.out(`verify: equal at seq ${r.seq} (digest ${r.primary})`);
  else ctx.out(`verify: NOT equal at seq ${r.seq}: primary ${r.primary}, standby ${r.standby}`);
  return equal ? ExitCode.ok : ExitCode.checkFailed;
}

export async function promote(ctx: Context, force: boolean): Promise<ExitCode> {
  const t = await find(ctx, "standby");
  const r = await t.client.admin(`/v1/promote${force ? "?force=true" : ""}`, ctx.actionTimeoutMs);
  ctx.out(
    ctx.json ? JSON.stringify(r) : `promote: ${name(t)} is now ${r.role} at epoch ${r.epoch}`,
  );
  return ExitCode.ok;
}

export async function demote(ctx: Context, force: boolean): Promise<ExitCode> {
  const t = await find(ctx, "primary");
  const r = await t.client.admin(`/v1/demote${force ? "?force=true" : ""}`, ctx.actionTimeoutMs);
  const how =
    r.discarded === true
      ? "stepped down without a handover (forced)"
      : `handed over at seq ${r.seq}, guests paused ${roundMs(r.pauseMs)} ms`;
  ctx.out(
    ctx.json
      ? JSON.stringify(r)
      : `demote: ${name(t)} is now ${r.role} at epoch ${r.epoch}; ${how}`,
  );
  return ExitCode.ok;
}

/**
 * Runs the switchover on the primary while polling the other nodes every 100 ms, printing
 * when one of them becomes primary. Exit 1 if none is seen serving shortly after the handover.
 */
export async function switchover(
  ctx: Context,
  wait: { readonly ready: boolean; readonly timeoutMs: number } = { ready: false, timeoutMs: 0 },
): Promise<ExitCode> {
  const t = await find(ctx, "primary");
  const others = ctx.clients.filter((c) => c !== t.client);
  const log = (line: string) => {
    if (!ctx.json) ctx.out(line);
  };
  log(`switchover: handing over from ${name(t)}…`);
  let successor: NodeStatus | undefined;
  const poll = async () => {
    for (const c of others) {
      const s = await c.status().catch(() => undefined); // a node mid-transition may not answer
      if (s?.role === "primary" && s.epoch > t.status.epoch) {
        successor = s;
        log(`switchover: ${s.nodeId} (${c.url}) is primary at epoch ${s.epoch}`);
        return;
      }
    }
  };
  let done = false;
  const running = t.client.admin("/v1/switchover", ctx.actionTimeoutMs).finally(() => {
    done = true;
  });
  const watching = (async () => {
    while (!done && !successor) {
      await poll();
      if (!successor) await sleep(SWITCHOVER_POLL_MS);
    }
  })();
  const r = await running;
  await watching;
  log(`switchover: ${name(t)} handed over at seq ${r.seq}, guests paused ${roundMs(r.pauseMs)} ms`);
  const deadline = performance.now() + NEW_PRIMARY_WAIT_MS;
  while (others.length > 0 && !successor && performance.now() < deadline) {
    await sleep(SWITCHOVER_POLL_MS);
    await poll();
  }
  if (ctx.json) ctx.out(JSON.stringify({ ...r, newPrimary: successor?.nodeId ?? null }));
  if (others.length > 0 && !successor) {
    log(`switchover: no other node became primary within ${NEW_PRIMARY_WAIT_MS} ms`);
    return ExitCode.checkFailed;
  }
  log(
    `switchover: done; ${successor?.nodeId ?? "the peer"} is primary, ${t.status.nodeId} is ${r.role} (epoch ${r.epoch})`,
  );
  if (!wait.ready) return ExitCode.ok;
  log("switchover: waiting until both nodes are ready (--no-wait to skip)…");
  const quiet = { ...ctx, out: ctx.json ? () => undefined : ctx.out };
  return waitReady(quiet, wait.timeoutMs);
}
