// `vgpuctl sessions [--tenant T]` and `vgpuctl sessions close ID`: the guest sessions the
// primary holds (GET /v1/sessions) and ending one through the log (POST /v1/sessions/ID/close).
import type { SessionView } from "@vgpu-ha/common";
import { type Context, find } from "./commands.js";
import { ExitCode } from "./exit-codes.js";
import { mib, renderColumns } from "./format.js";

const HEADER = ["TENANT", "SESSION", "OPENED", "LAST FRAME", "STREAM", "CONTEXTS", "VRAM"];

/** "attached", or "idle 42 s (since 12:00:01)"; "idle" alone when the node has no time. */
function streamOf(s: SessionView): string {
  if (s.attached) return "attached";
  if (s.idleSeconds === null || s.idleSince === null) return "idle";
  return `idle ${Math.floor(s.idleSeconds)} s (since ${s.idleSince})`;
}

function row(s: SessionView): string[] {
  return [
    s.tenant,
    s.id,
    s.opened ?? "-",
    String(s.lastFrame),
    streamOf(s),
    String(s.contexts),
    `${mib(s.vramBytes)} MiB`,
  ];
}

/** Lists the primary's sessions (one tenant's with `tenant`). */
export async function list(ctx: Context, tenant: string | undefined): Promise<ExitCode> {
  const t = await find(ctx, "primary");
  const query = tenant === undefined ? "" : `?tenant=${encodeURIComponent(tenant)}`;
  const r = await t.client.adminGet(`/v1/sessions${query}`);
  const sessions = (r.sessions ?? []) as SessionView[];
  if (ctx.json) {
    ctx.out(JSON.stringify(r));
    return ExitCode.ok;
  }
  const title = `${sessions.length} session${sessions.length === 1 ? "" : "s"} on ${t.status.nodeId}`;
  ctx.out(`${title}${tenant === undefined ? "" : ` of tenant ${tenant}`}`);
  if (sessions.length > 0) ctx.out(renderColumns(HEADER, sessions.map(row)));
  return ExitCode.ok;
}

/** Ends one session on the primary, through the log; exit 5 for an unknown id. */
export async function close(ctx: Context, id: string): Promise<ExitCode> {
  const t = await find(ctx, "primary");
  const r = await t.client.admin(
    `/v1/sessions/${encodeURIComponent(id)}/close`,
    ctx.actionTimeoutMs,
  );
  if (ctx.json) ctx.out(JSON.stringify(r));
  else {
    const where =
      r.replicated === true
        ? "on both nodes"
        : "on the primary (the standby has not confirmed it yet)";
    ctx.out(`sessions close: ${id} of tenant ${r.tenant} closed at seq ${r.seq} ${where}`);
  }
  return ExitCode.ok;
}
