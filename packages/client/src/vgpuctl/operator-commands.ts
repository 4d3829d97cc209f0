// vgpuctl's operator commands beyond status and the role actions: maintenance mode (pause,
// resume), the role history of both nodes, reinit of a standby (with its resync progress),
// and wait-ready for scripts. Each returns its exit code; failures are CliErrors.
import type { Context } from "./commands.js";
import { find } from "./commands.js";
import { CliError, ExitCode } from "./exit-codes.js";
import type { NodeStatus, OpsClient, RoleChange } from "./ops-client.js";
import { ResyncBar } from "./progress.js";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const POLL_MS = 250;
/** How long pause/resume wait to see the standby follow the primary's flag. */
const FOLLOW_WAIT_MS = 5_000;

const reachable = async (ctx: Context) => {
  const vs = await Promise.all(ctx.clients.map((c) => c.view()));
  return vs.flatMap((v, i) => ("problem" in v ? [] : [{ client: ctx.clients[i]!, view: v }]));
};

/**
 * pause / resume: set on the primary, which carries the flag to its standby on every
 * heartbeat; then wait until every other reachable node shows it. Without a reachable primary,
 * each reachable standby is set directly (it accepts only while no primary is in sight).
 */
export async function maintenance(ctx: Context, paused: boolean): Promise<ExitCode> {
  const verb = paused ? "pause" : "resume";
  const nodes = await reachable(ctx);
  if (nodes.length === 0) {
    throw new CliError(ExitCode.unreachable, `${verb}: no node answered`);
  }
  const primaries = nodes.filter((n) => n.view.status.role === "primary");
  primaries.sort((x, y) => y.view.status.epoch - x.view.status.epoch);
  const targets = primaries[0] ? [primaries[0]] : nodes;
  for (const t of targets) await t.client.admin(`/v1/${verb}`, ctx.actionTimeoutMs);
  const others = nodes.filter((n) => !targets.includes(n)).map((n) => n.client);
  const deadline = performance.now() + FOLLOW_WAIT_MS;
  let lagging = others;
  while (lagging.length > 0 && performance.now() < deadline) {
    await sleep(POLL_MS);
    const states = await Promise.all(lagging.map((c) => c.status().catch(() => undefined)));
    lagging = lagging.filter((_, i) => states[i]?.maintenance?.paused !== paused);
  }
  const names = nodes.map((n) => n.view.status.nodeId).join(", ");
  if (ctx.json) {
    ctx.out(
      JSON.stringify({ paused, nodes: names.split(", "), lagging: lagging.map((c) => c.url) }),
    );
  } else if (lagging.length === 0) {
    ctx.out(
      paused
        ? `pause: maintenance mode on ${names}: no automatic failover until vgpuctl resume (switchover and promote still work)`
        : `resume: automatic failover on again on ${names}`,
    );
  } else {
    ctx.out(
      `${verb}: ${lagging.map((c) => c.url).join(", ")} did not follow within ${FOLLOW_WAIT_MS} ms`,
    );
  }
  return lagging.length === 0 ? ExitCode.ok : ExitCode.checkFailed;
}

/** Both nodes' histories merged (a change either node recorded, once), oldest first. */
export function mergeHistories(lists: readonly (readonly RoleChange[])[]): RoleChange[] {
  const seen = new Map<string, RoleChange>();
  for (const list of lists) {
    for (const c of list) seen.set(`${c.node}\u0000${c.at}\u0000${c.epoch}\u0000${c.to}`, c);
  }
  return [...seen.values()].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
}

export async function history(ctx: Context): Promise<ExitCode> {
  const lists = await Promise.all(
    ctx.clients.map((c) =>
      c.history().then(
        (h) => ({ url: c.url, h }),
        (e: CliError) => ({ url: c.url, error: e }),
      ),
    ),
  );
  const failed = lists.flatMap((l) => ("error" in l ? [l] : []));
  if (failed.length === lists.length) throw failed[0]!.error;
  const merged = mergeHistories(lists.flatMap((l) => ("h" in l ? [l.h] : [])));
  if (ctx.json) {
    ctx.out(JSON.stringify(merged, null, 2));
  } else {
    const header = ["TIME", "NODE", "EPOCH", "FROM → TO", "REASON", "SEQ", "BY"];
    const rows = merged.map((c) => [
      c.at,
      c.node,
      String(c.epoch),
      `${c.from} → ${c.to}`,
      c.reason,
      String(c.seq),
      c.by,
    ]);
    ctx.out(table([header, ...rows]));
    for (const f of failed) ctx.out(`(${f.error.message}: its changes are missing)`);
  }
  return failed.length > 0 ? ExitCode.unreachable : ExitCode.ok;
}

function table(rows: readonly string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** The client of the node named by its nodeId or its ops URL. */
async function nodeNamed(
  ctx: Context,
  node: string,
): Promise<{ client: OpsClient; status: NodeStatus }> {
  const byUrl = ctx.clients.find((c) => c.url === node.replace(/\/+$/, ""));
  const nodes = byUrl ? [{ client: byUrl }] : ctx.clients.map((client) => ({ client }));
  const seen: string[] = [];
  for (const { client } of nodes) {
    const status = await client.status().catch(() => undefined);
    if (status && (byUrl || status.nodeId === node)) return { client, status };
    if (status) seen.push(status.nodeId);
  }
  throw new CliError(
    ExitCode.usage,
    `no node ${node} among ${seen.join(", ") || "the nodes that answered"}`,
  );
}

/**
 * reinit NODE: the standby drops its replica and takes a fresh snapshot from the primary;
 * then, unless noWait, shows the resync (a bar on a terminal) until the standby is ready.
 */
export async function reinit(
  ctx: Context,
  node: string,
  opts: { force: boolean; noWait: boolean; timeoutMs: number; tty: boolean },
): Promise<ExitCode> {
  const t = await nodeNamed(ctx, node);
  const r = await t.client.admin(
    `/v1/reinit${opts.force ? "?force=true" : ""}`,
    ctx.actionTimeoutMs,
  );
  if (!ctx.json)
    ctx.out(
      `reinit: ${t.status.nodeId} dropped its replica at seq ${r.droppedSeq}; taking a snapshot`,
    );
  if (opts.noWait) {
    if (ctx.json) ctx.out(JSON.stringify(r));
    return ExitCode.ok;
  }
  const progress = new ResyncBar(opts.tty && !ctx.json, ctx.out);
  const deadline = performance.now() + opts.timeoutMs;
  try {
    for (;;) {
      const ready = await t.client.readiness().catch(() => undefined);
      if (ready?.ready) break;
      if (performance.now() > deadline) {
        throw new CliError(
          ExitCode.checkFailed,
          `reinit: ${t.status.nodeId} not ready within ${opts.timeoutMs} ms`,
        );
      }
      const primary = await find(ctx, "primary").catch(() => undefined);
      const snapshot = primary?.status.replication?.snapshot;
      if (snapshot) progress.update(snapshot);
      await sleep(opts.tty ? POLL_MS : 1000);
    }
  } finally {
    progress.stop();
  }
  const after = await t.client.status();
  if (ctx.json) ctx.out(JSON.stringify({ ...r, ready: true, appliedSeq: after.seq.applied }));
  else ctx.out(`reinit: ${t.status.nodeId} is a replica again at seq ${after.seq.applied}`);
  return ExitCode.ok;
}

/** Waits until every node given answers /readyz 200; exit 1 when the time runs out. */
export async function waitReady(ctx: Context, timeoutMs: number): Promise<ExitCode> {
  const deadline = performance.now() + timeoutMs;
  let last: string[] = [];
  for (;;) {
    const answers = await Promise.all(
      ctx.clients.map((c) =>
        c.readiness().then(
          (r) => (r.ready ? undefined : `${c.url}: ${r.reason}`),
          (e: Error) => e.message,
        ),
      ),
    );
    last = answers.filter((a): a is string => a !== undefined);
    if (last.length === 0) {
      if (!ctx.json) ctx.out(`ready: ${ctx.clients.map((c) => c.url).join(", ")}`);
      else ctx.out(JSON.stringify({ ready: true }));
      return ExitCode.ok;
    }
    if (performance.now() >= deadline) break;
    await sleep(POLL_MS);
  }
  if (ctx.json) ctx.out(JSON.stringify({ ready: false, notReady: last }));
  else ctx.out(`not ready within ${timeoutMs / 1000} s: ${last.join("; ")}`);
  return ExitCode.checkFailed;
}
