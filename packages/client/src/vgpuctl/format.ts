// The compact status table of `vgpuctl status` and `watch`: one row a node, pure strings.
import type { NodeStatus, NodeView } from "./ops-client.js";
import { formatSeconds, resyncLine } from "./progress.js";

const HEADER = [
  "NODE",
  "URL",
  "ROLE",
  "EPOCH",
  "MODE",
  "TLS",
  "LEASE/STATE",
  "SEQ LAST/APPLIED",
  "LAG",
  "SESSIONS",
  "VRAM USED/TOTAL",
  "VERSION",
  "READY",
] as const;

const MIB = 1024 * 1024;

/** A duration the node reports with sub-millisecond noise, as whole milliseconds. */
export const roundMs = (ms: unknown): string =>
  typeof ms === "number" ? String(Math.round(ms)) : "?";

/** Bytes in MiB: one decimal below 10. */
export function mib(bytes: number): string {
  const v = bytes / MIB;
  return v < 10 ? v.toFixed(1) : String(Math.round(v));
}

export function formatMib(usedBytes: number, totalBytes: number): string {
  return `${mib(usedBytes)}/${Math.round(totalBytes / MIB)} MiB`;
}

/**
 * Primary: "<lease>/<replication>" ("degraded" once, whether the lease state says it or the
 * degraded flag does); standby: its replica state and whether it may promote.
 */
export function stateOf(s: NodeStatus): string {
  const repl = s.replication?.state ?? "-";
  if (s.role === "primary") {
    const lease = s.lease?.state ?? "no-lease";
    const flag = s.degraded && lease !== "degraded" ? " degraded" : "";
    return `${lease}/${repl}${flag}`;
  }
  if (s.replication?.eligible === false) return `${repl} (ineligible)`;
  return repl;
}

function row(v: NodeView): string[] {
  const url = v.url.replace(/^https?:\/\//, "");
  if ("problem" in v) return ["?", url, v.problem];
  const s = v.status;
  return [
    s.nodeId,
    url,
    s.role,
    String(s.epoch),
    s.replicationMode ?? "-",
    tlsOf(s),
    stateOf(s),
    `${s.seq.last}/${s.seq.applied}`,
    lagOf(s),
    String(s.sessions),
    formatMib(s.vram.usedBytes, s.vram.totalBytes),
    s.version ?? "?",
    v.ready.ready ? "yes" : `no: ${v.ready.reason}`,
  ];
}

/** "mtls" when the replication link uses mutual TLS, with the guest port's mode after a slash. */
function tlsOf(s: NodeStatus): string {
  if (!s.tls) return "?";
  const repl = s.tls.replication ? "on" : "off";
  return s.tls.guest === "off" ? repl : `${repl}/guest:${s.tls.guest}`;
}

/** A primary without a standby has no lag: "no standby", not a number that only grows. */
function lagOf(s: NodeStatus): string {
  if (!s.replication) return "-";
  return s.replication.lag ? String(s.replication.lag.entries) : "no standby";
}

/** The status table: one row a node. */
export function renderTable(views: readonly NodeView[]): string {
  return renderColumns(HEADER, views.map(row));
}

/** Columns are padded to their widest cell; a short row's last cell runs to the end. */
export function renderColumns(header: readonly string[], body: readonly string[][]): string {
  const rows = [[...header], ...body];
  // a short row's last cell spans the columns after it, so it does not widen its own
  const widths = header.map((_, i) =>
    Math.max(
      ...rows
        .filter((r) => i < r.length - 1 || r.length === header.length)
        .map((r) => r[i]!.length),
    ),
  );
  return rows
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/**
 * The peer's version when it differs from this node's (a rolling upgrade under way), and loudly
 * when its protocol does: the pair does not replicate then.
 */
export function peerVersionLine(s: NodeStatus): string | undefined {
  const p = s.replication?.peerVersion;
  if (!p) return undefined;
  const peer = `${s.nodeId}: peer ${s.replication?.peer ?? "?"}`;
  const runs = `vgpud ${p.version} (replication protocol ${p.protocolVersion})`;
  if (s.protocolVersion !== undefined && p.protocolVersion !== s.protocolVersion) {
    return `${peer} runs ${runs}, this node protocol ${s.protocolVersion}: INCOMPATIBLE, not replicating (docs/operations.md#upgrade)`;
  }
  return p.version === s.version
    ? undefined
    : `${peer} runs ${runs}, this node ${s.version ?? "?"}`;
}

/**
 * A node's device when it is not the plain CPU model (a GPU, or a GPU that fell back), and
 * loudly when its peer's device runs another kernel contract: the pair does not replicate then.
 */
export function deviceLines(s: NodeStatus): string[] {
  const lines: string[] = [];
  const d = s.device;
  const contract = s.kernelContractVersion;
  if (d?.backend !== undefined && (d.backend !== "model" || d.fallbackReason !== undefined)) {
    const fallback = d.fallbackReason ? `: FALLBACK (${d.fallbackReason})` : "";
    lines.push(
      `${s.nodeId}: device ${d.description ?? d.backend} (kernel contract ${contract ?? "?"})${fallback}`,
    );
  }
  const p = s.replication?.peerVersion;
  const theirs = p ? (p.kernelContract ?? 1) : undefined;
  if (theirs !== undefined && contract !== undefined && theirs !== contract) {
    const device = p?.device ? ` (${p.device})` : "";
    lines.push(
      `${s.nodeId}: peer ${s.replication?.peer ?? "?"} runs kernel contract ${theirs}${device}, this node ${contract}: INCOMPATIBLE, not replicating (docs/gpu.md)`,
    );
  }
  return lines;
}

/**
 * The nodes' lineages when they differ: they hold different histories (docs/replication.md#lineage),
 * e.g. nodes of two pairs, or one started afresh. Nodes with none yet (a fresh standby) and
 * nodes that did not answer are left out; equal lineages say nothing.
 */
export function lineageLine(views: readonly NodeView[]): string | undefined {
  const shown = views.flatMap((v) =>
    "problem" in v || typeof v.status.lineage !== "string" ? [] : [v.status],
  );
  if (new Set(shown.map((s) => s.lineage)).size < 2) return undefined;
  const each = shown.map((s) => `${s.nodeId} ${s.lineage}`).join(", ");
  return `LINEAGES DIFFER: ${each}: not one history (a standby drops a replica of another history for a snapshot when it hears that primary)`;
}

/**
 * Lines under the table: each node's last role change, maintenance mode, its peer's version
 * when it differs, its device when a GPU (and a peer of another kernel contract), a resync
 * under way; then the nodes' lineages if they differ.
 */
export function renderDetails(views: readonly NodeView[], tty: boolean): string {
  const lines: string[] = [];
  for (const v of views) {
    if ("problem" in v) continue;
    const s = v.status;
    const c = s.lastRoleChange;
    if (c) {
      lines.push(
        `${s.nodeId}: ${c.to} for ${formatSeconds(c.ageSeconds)} (${c.reason}, from ${c.from}, by ${c.by}, epoch ${c.epoch})`,
      );
    }
    const m = s.maintenance;
    if (m?.paused) {
      const held = m.pausedSeconds === undefined ? "" : ` for ${formatSeconds(m.pausedSeconds)}`;
      lines.push(
        `${s.nodeId}: MAINTENANCE: paused${held} by ${m.by ?? "?"}: no automatic failover (vgpuctl resume)`,
      );
    }
    const peer = peerVersionLine(s);
    if (peer) lines.push(peer);
    lines.push(...deviceLines(s));
    const resync = resyncLine(s, tty);
    if (resync) lines.push(resync);
  }
  const lineage = lineageLine(views);
  if (lineage) lines.push(lineage);
  return lines.join("\n");
}
