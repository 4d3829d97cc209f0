// The guest sessions a node holds, as operators see them (GET /v1/sessions): from the
// replicated session table (tenant, id, last frame, contexts, VRAM) and, on a primary, this
// node's own view of its streams (opened, attached or idle since). Times are wall-clock ISO
// strings for display, converted from the monotonic times the idle rule uses.
import type { Clock, SessionView } from "@vgpu-ha/common";
import type { Backend } from "@vgpu-ha/gpu-model";
import type { IdleSessions } from "./core/idle-sessions.js";

/** Every session (of `tenant` when given), by tenant then id. */
export function listSessions(
  backend: Backend,
  idle: IdleSessions | undefined,
  clock: Clock,
  tenant?: string,
): SessionView[] {
  const nowMono = clock.monotonicMs();
  const nowWall = clock.wallMs();
  const wall = (mono: number | undefined) =>
    mono === undefined ? null : new Date(nowWall - (nowMono - mono)).toISOString();
  const out: SessionView[] = [];
  for (const s of backend.sessions.values()) {
    if (tenant !== undefined && s.tenant !== tenant) continue;
    const a = idle?.activity(s.id);
    out.push({
      tenant: s.tenant,
      id: s.id,
      opened: wall(a?.openedMs),
      lastFrame: s.lastFrame,
      attached: a?.attached ?? false,
      idleSince: wall(a?.idleSinceMs),
      idleSeconds: a?.idleSinceMs === undefined ? null : (nowMono - a.idleSinceMs) / 1000,
      contexts: s.contexts.size,
      vramBytes: backend.sessionVramBytes(s.id),
    });
  }
  return out.sort((x, y) => x.tenant.localeCompare(y.tenant) || x.id.localeCompare(y.id));
}
