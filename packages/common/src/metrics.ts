// The metrics factory: one prom-client Registry per node (never the global one, so tests can
// run several nodes in one process). Prometheus conventions: vgpu_ prefix, base units, _total
// counters, _seconds histograms, bounded labels (never a session id or a handle).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { CallStats, registerCallMetrics } from "./call-stats.js";

/** What the gauges read at scrape time. */
export interface NodeGauges {
  role(): string;
  epoch(): number;
  sessions(): number;
  contexts(): number;
  bos(): number;
  vramUsedBytes(): number;
  vramTotalBytes(): number;
  replication(): ReplicationGauges;
  /** The configured lease (lease.durationMs) in seconds; 0 when not given. */
  leaseDurationSeconds?(): number;
  /** Maintenance mode and resync progress; absent: not paused, no resync. */
  operator?(): OperatorGauges;
  /**
   * Bytes the guest port's gRPC decoders keep alive (the message each stream reads, or read
   * last); absent: not exported.
   */
  guestIncompleteBytes?(): number;
}

/** What operators watch beside replication: maintenance mode and a resync in progress. */
export interface OperatorGauges {
  /** Since when (wall-clock ms) the pair is paused (vgpuctl pause); undefined: not paused. */
  readonly pausedSinceMs: number | undefined;
  /** ops.maintenanceAlertAfterMs in seconds. */
  readonly pausedMaxSeconds: number;
  /** The snapshot being sent to the standby (primary only). */
  readonly resync:
    | {
        readonly totalBytes: number;
        readonly doneBytes: number;
        readonly rateBytesPerSecond: number;
        readonly etaSeconds: number | null;
      }
    | undefined;
}

/** Replication state read at scrape time; zeros where a role has no such thing. */
export interface ReplicationGauges {
  readonly lastSeq: number;
  readonly appliedSeq: number;
  readonly acknowledgedSeq: number;
  readonly lagEntries: number;
  readonly lagBytes: number;
  readonly lagSeconds: number;
  readonly connected: boolean;
  readonly snapshotInProgress: boolean;
  /** Standby: a complete, non-diverged replica. */
  readonly eligible: boolean;
  /** Primary: serving alone after losing its standby. */
  readonly degraded: boolean;
  /** Primary: seconds left on its lease (0 when it holds none). */
  readonly leaseRemainingSeconds: number;
}

/** The gauges of a node that replicates nothing (standalone, or before it has a role). */
export const NO_REPLICATION: ReplicationGauges = {
  lastSeq: 0,
  appliedSeq: 0,
  acknowledgedSeq: 0,
  lagEntries: 0,
  lagBytes: 0,
  lagSeconds: 0,
  connected: false,
  snapshotInProgress: false,
  eligible: false,
  degraded: false,
  leaseRemainingSeconds: 0,
};

export const ROLES = ["standalone", "primary", "standby"] as const;

/**
 * Gauges of a node that has nothing to report (role as given, everything else zero): for
 * registries nobody scrapes, as the test harnesses and the failover simulator build them.
 */
export function idleGauges(
  role: (typeof ROLES)[number],
  sessions: () => number = () => 0,
): NodeGauges {
  return {
    role: () => role,
    epoch: () => 0,
    sessions,
    contexts: () => 0,
    bos: () => 0,
    vramUsedBytes: () => 0,
    vramTotalBytes: () => 0,
    replication: () => NO_REPLICATION,
  };
}

/**
 * prom-client's default metrics that are gauges named `_total`, which `promtool check metrics`
 * refuses (only counters end in `_total`). Each is the sum of the per-type gauge of the same
 * name without the suffix (`sum(nodejs_active_handles)`), so nothing is lost by leaving them out.
 */
const NON_COUNTER_TOTALS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
] as const;

export function createMetrics(gauges: NodeGauges, options: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.processMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    for (const name of NON_COUNTER_TOTALS) registry.removeSingleMetric(name);
  }
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
  if (gauges.guestIncompleteBytes) {
    simple(
      "vgpu_guest_incomplete_message_bytes",
      "Bytes the guest port's gRPC decoders keep alive: the socket-read buffers holding the message each stream is receiving, or received last (bounded by guest.maxIncompleteBytesTotal)",
      gauges.guestIncompleteBytes,
    );
  }
  simple("vgpu_vram_used_bytes", "VRAM allocated to buffers", gauges.vramUsedBytes);
  simple("vgpu_vram_total_bytes", "VRAM size of the device", gauges.vramTotalBytes);
  const r = gauges.replication;
  simple("vgpu_last_seq", "Highest log seq this node has (primary: written)", () => r().lastSeq);
  simple("vgpu_applied_seq", "Highest seq the standby has applied", () => r().appliedSeq);
  simple(
    "vgpu_acknowledged_seq",
    "Highest seq whose frames were acknowledged to guests",
    () => r().acknowledgedSeq,
  );
  simple("vgpu_replication_lag_entries", "Log entries the standby lacks", () => r().lagEntries);
  simple("vgpu_replication_lag_bytes", "Log bytes the standby lacks", () => r().lagBytes);
  simple(
    "vgpu_replication_lag_seconds",
    "Age of the oldest entry the standby lacks",
    () => r().lagSeconds,
  );
  simple("vgpu_replication_connected", "1 while the replication link is up", () =>
    r().connected ? 1 : 0,
  );
  simple("vgpu_snapshot_in_progress", "1 while a snapshot is being transferred", () =>
    r().snapshotInProgress ? 1 : 0,
  );
  simple("vgpu_standby_eligible", "1 when this standby could take over", () =>
    r().eligible ? 1 : 0,
  );
  simple("vgpu_degraded", "1 while a primary serves alone, without a standby", () =>
    r().degraded ? 1 : 0,
  );
  simple(
    "vgpu_lease_remaining_seconds",
    "Seconds left on the primary's lease",
    () => r().leaseRemainingSeconds,
  );
  simple(
    "vgpu_lease_duration_seconds",
    "The configured lease (lease.durationMs; lease.etcd.ttlMs in etcd mode), to compare the remaining lease with",
    () => gauges.leaseDurationSeconds?.() ?? 0,
  );
  const op = () => gauges.operator?.();
  simple("vgpu_maintenance_paused", "1 while maintenance mode holds automatic failover", () =>
    op()?.pausedSinceMs !== undefined ? 1 : 0,
  );
  simple(
    "vgpu_maintenance_paused_since_timestamp_seconds",
    "When maintenance mode began (Unix time); 0 when not paused",
    () => (op()?.pausedSinceMs ?? 0) / 1000,
  );
  simple(
    "vgpu_maintenance_paused_max_seconds",
    "How long maintenance mode may last before it alerts (ops.maintenanceAlertAfterMs)",
    () => op()?.pausedMaxSeconds ?? 0,
  );
  simple(
    "vgpu_resync_size_bytes",
    "Buffer bytes the snapshot in progress covers; 0 when none",
    () => op()?.resync?.totalBytes ?? 0,
  );
  simple(
    "vgpu_resync_done_bytes",
    "Of those, the bytes the standby acknowledged",
    () => op()?.resync?.doneBytes ?? 0,
  );
  simple(
    "vgpu_resync_rate_bytes_per_second",
    "Average resync rate since the snapshot began",
    () => op()?.resync?.rateBytesPerSecond ?? 0,
  );
  simple(
    "vgpu_resync_eta_seconds",
    "Seconds the resync has left at its average rate; NaN while unknown, 0 when none",
    () => {
      const r = op()?.resync;
      return r === undefined ? 0 : (r.etaSeconds ?? Number.NaN);
    },
  );

  const callStats = new CallStats();
  registerCallMetrics(callStats, registry);
  return {
    registry,
    /** vgpu_frames_total, vgpu_calls_total and vgpu_call_duration_seconds, in plain numbers. */
    callStats,
    mmioStores: new Counter({
      name: "vgpu_mmio_stores_total",
      help: "MMIO stores trapped and applied",
      registers,
    }),
    sessionsOpened: new Counter({
      name: "vgpu_sessions_opened_total",
      help: "Guest sessions opened or resumed, by kind (new, resume)",
      labelNames: ["kind"],
      registers,
    }),
    replicatedEntries: new Counter({
      name: "vgpu_replication_entries_total",
      help: "Log entries sent to the standby, by kind",
      labelNames: ["kind"],
      registers,
    }),
    replicatedBytes: new Counter({
      name: "vgpu_replication_bytes_total",
      help: "Log entry bytes sent to the standby, by kind",
      labelNames: ["kind"],
      registers,
    }),
    appliedEntries: new Counter({
      name: "vgpu_applied_entries_total",
      help: "Log entries applied by this standby",
      registers,
    }),
    mmioPageBatches: new Counter({
      name: "vgpu_mmio_page_batches_total",
      help: "MMIO page batches cut (per-page replication)",
      registers,
    }),
    mmioPagesShipped: new Counter({
      name: "vgpu_mmio_pages_shipped_total",
      help: "Dirty pages shipped in page batches",
      registers,
    }),
    mmioBytesShipped: new Counter({
      name: "vgpu_mmio_shipped_bytes_total",
      help: "MMIO bytes shipped to the standby (written extents, or single stores)",
      registers,
    }),
    snapshots: new Counter({
      name: "vgpu_snapshots_total",
      help: "Snapshots by event (started, completed, resumed)",
      labelNames: ["event"],
      registers,
    }),
    snapshotBytes: new Counter({
      name: "vgpu_snapshot_bytes_total",
      help: "Snapshot bytes sent",
      registers,
    }),
    snapshotDuration: new Histogram({
      name: "vgpu_snapshot_duration_seconds",
      help: "Time from the start of a snapshot to its last acknowledged chunk",
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    resumes: new Counter({
      name: "vgpu_replication_resumes_total",
      help: "Standby reconnections served from the retained log, without a snapshot",
      registers,
    }),
    divergences: new Counter({
      name: "vgpu_divergences_total",
      help: "Divergences detected between the replicas",
      registers,
    }),
    promotions: new Counter({
      name: "vgpu_promotions_total",
      help: "Times this node became primary, by reason (cold_start, lease_expired, rejoin)",
      labelNames: ["reason"],
      registers,
    }),
    demotions: new Counter({
      name: "vgpu_demotions_total",
      help: "Times this node stopped being primary, by reason",
      labelNames: ["reason"],
      registers,
    }),
    promotionBacklogWait: new Histogram({
      name: "vgpu_promotion_backlog_wait_seconds",
      help: "Takeovers that waited for this standby's device to apply its received backlog, and how long",
      buckets: [0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    failovers: new Counter({
      name: "vgpu_failovers_total",
      help: "Unplanned takeovers: times this standby became primary because its primary's lease expired",
      registers,
    }),
    deviceFailures: new Counter({
      name: "vgpu_device_failures_total",
      help: "Device failures (work past device.maxCallMs, or the device thread died): own, this node's device (it then steps down and exits 3); peer, its primary's, as its DeviceFault told this standby",
      labelNames: ["whose"],
      registers,
    }),
    deviceFailed: new Gauge({
      name: "vgpu_device_failed",
      help: "1 once this node's device has failed (the node is stepping down and exits)",
      registers,
    }),
    deviceInfo: new Gauge({
      name: "vgpu_device_info",
      help: "Always 1: what runs this node's device (backend model or webgpu), the kernel contract version it implements, and for webgpu the GPU adapter (vendor, architecture, device, driver) and the Dawn (npm webgpu) package version",
      labelNames: [
        "backend",
        "kernel_contract",
        "vendor",
        "architecture",
        "device",
        "driver",
        "webgpu",
      ],
      registers,
    }),
    switchovers: new Counter({
      name: "vgpu_switchovers_total",
      help: "Planned switchovers this node handed over",
      registers,
    }),
    splitBrainDiscards: new Counter({
      name: "vgpu_split_brain_discarded_total",
      help: "Work a primary discarded when it met a higher epoch: frames applied, frames whose replies went out (acknowledged_frames), sessions",
      labelNames: ["what"],
      registers,
    }),
    stateDiscards: new Counter({
      name: "vgpu_state_discarded_total",
      help: "What a primary threw away when it stepped down without a handover (it restarts as an empty standby): sessions, contexts and bytes of VRAM it held, and log entries its peer never confirmed (entries)",
      labelNames: ["what"],
      registers,
    }),
    replicationRefusals: new Counter({
      name: "vgpu_replication_refusals_total",
      help: "Replication streams and probes refused (or peers not believed) because they did not come from this node's configured peer (wrong_cluster, wrong_node, own_node_id, no_hello) or it speaks another replication protocol version (incompatible_version) or its device runs another kernel contract (incompatible_contract); by direction (inbound: dialled us; outbound: we dialled it)",
      labelNames: ["reason", "direction"],
      registers,
    }),
    staleEpochRefusals: new Counter({
      name: "vgpu_stale_epoch_refusals_total",
      help: "Messages refused because they carried an older epoch",
      registers,
    }),
    sessionErrors: new Counter({
      name: "vgpu_session_errors_total",
      help: "Guest streams ended by a session-level error, by code",
      labelNames: ["code"],
      registers,
    }),
    tlsRefusals: new Counter({
      name: "vgpu_tls_refusals_total",
      help: "Connections refused on a TLS port (guest, replication): failed handshake (plaintext, unknown CA, no certificate), a certificate not signed by the CA, or not naming the peer",
      labelNames: ["port", "reason"],
      registers,
    }),
    sessionsReaped: new Counter({
      name: "vgpu_sessions_reaped_total",
      help: "Guest sessions closed by the primary after no stream was attached for guest.sessionIdleSeconds, by tenant",
      labelNames: ["tenant"],
      registers,
    }),
    sessionsClosedByOperator: new Counter({
      name: "vgpu_sessions_closed_by_operator_total",
      help: "Guest sessions closed through the ops API (POST /v1/sessions/ID/close), by tenant",
      labelNames: ["tenant"],
      registers,
    }),
    guestRefusals: new Counter({
      name: "vgpu_guest_refusals_total",
      help: "Guest connections and streams refused or closed by the guest listener's defences, by reason (penalty, connections_per_source, stream_rate, early_reset, stream_limit, open_timeout, auth, wrong_cluster, protocol_error: bytes that are not HTTP/2, incomplete_bytes: a stream reset past a budget of bytes held in incomplete messages)",
      labelNames: ["reason"],
      registers,
    }),
    refusalThrottles: new Counter({
      name: "vgpu_refusal_throttles_total",
      help: "Times a tenant used up its budget of refused frames (limits.refusedFramesPerSecond) and its frames were held back, by tenant",
      labelNames: ["tenant"],
      registers,
    }),
  };
}

export type NodeMetrics = ReturnType<typeof createMetrics>;
