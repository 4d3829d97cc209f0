// The metrics factory: one prom-client Registry per node (never the global one, so tests can
// run several nodes in one process). Prometheus conventions: vgpu_ prefix, base units, _total
// counters, _seconds histograms, bounded labels (never a session id or a handle).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** What the gauges read at scrape time. */
export interface NodeGauges {
  role(): string;
  epoch(): number;
  sessions(): number;
  contexts(): number;
  bos(): number;
  vramUsedBytes(): number;
  vramTotalBytes(): number;
}

export const ROLES = ["standalone", "primary", "standby"] as const;

export function createMetrics(gauges: NodeGauges, options: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  new Gauge({
    name: "vgpu_role",
    help: "1 for the role this node has now, 0 for the others",
    labelNames: ["role"],
    registers,
    collect() {
      const now = gauges.role();
      for (const role of ROLES) this.set({ role }, role === now ? 1 : 0);
    },
  });
  const simple = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read());
      },
    });
  simple("vgpu_epoch", "Current epoch of this node", gauges.epoch);
  simple("vgpu_sessions", "Guest sessions in the session table", gauges.sessions);
  simple("vgpu_contexts", "GPU contexts", gauges.contexts);
  simple("vgpu_bos", "Buffer objects allocated", gauges.bos);
  simple("vgpu_vram_used_bytes", "VRAM allocated to buffers", gauges.vramUsedBytes);
  simple("vgpu_vram_total_bytes", "VRAM size of the device", gauges.vramTotalBytes);

  return {
    registry,
    calls: new Counter({
      name: "vgpu_calls_total",
      help: "Paravirtual calls executed, by operation and result code",
      labelNames: ["op", "code"],
      registers,
    }),
    callDuration: new Histogram({
      name: "vgpu_call_duration_seconds",
      help: "Time to execute one paravirtual call on this node",
      labelNames: ["op"],
      buckets: [1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 2e-3, 1e-2, 5e-2, 0.25, 1],
      registers,
    }),
    mmioStores: new Counter({
      name: "vgpu_mmio_stores_total",
      help: "MMIO stores trapped and applied",
      registers,
    }),
    frames: new Counter({
      name: "vgpu_frames_total",
      help: "Guest frames by outcome (applied, duplicate, rejected)",
      labelNames: ["outcome"],
      registers,
    }),
    sessionsOpened: new Counter({
      name: "vgpu_sessions_opened_total",
      help: "Guest sessions opened or resumed, by kind (new, resume)",
      labelNames: ["kind"],
      registers,
    }),
    sessionErrors: new Counter({
      name: "vgpu_session_errors_total",
      help: "Guest streams ended by a session-level error, by code",
      labelNames: ["code"],
      registers,
    }),
  };
}

export type NodeMetrics = ReturnType<typeof createMetrics>;
