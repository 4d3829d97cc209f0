// timeline.svg, written by hand: one lane per node colored by what it said it was (from the
// status polls), faults as bands across the lanes, and the guests' acknowledgements per
// quarter second as a line below. Plain SVG, no scripts, readable in any browser.
import type { Ack } from "./history.js";
import { NODE_NAMES, type NodeName } from "./hosts.js";
import type { StatusSample } from "./monitor.js";
import type { FaultRecord } from "./nemesis.js";

/** Pixels per second of run (at least the minimum width, at most the maximum). */
const PX_PER_S = 8;
const MIN_WIDTH = 1200;
const MAX_WIDTH = 8000;
/** Labels closer than this to the previous one in their row are left out. */
const LABEL_GAP = 30;
const LEFT = 90;
const RIGHT = 20;
const LANE_H = 26;
const LANE_GAP = 8;
const CHART_H = 140;

const COLORS: Record<string, { fill: string; label: string }> = {
  leased: { fill: "#2e7d32", label: "primary (leased)" },
  fenced: { fill: "#f9a825", label: "primary, lease lapsed (fenced)" },
  degraded: { fill: "#e65100", label: "primary alone (degraded)" },
  replica: { fill: "#1565c0", label: "standby, replica" },
  syncing: { fill: "#90caf9", label: "standby, empty or snapshot" },
  paused: { fill: "#6d4c41", label: "paused (SIGSTOP)" },
  silent: { fill: "#bdbdbd", label: "running, not answering" },
  down: { fill: "#eeeeee", label: "down" },
};

function stateOf(s: StatusSample): keyof typeof COLORS {
  if (s.process === "down") return "down";
  if (s.process === "paused") return "paused";
  if (!s.reachable) return "silent";
  if (s.role === "primary") {
    if (s.degraded) return "degraded";
    return s.lease === "fenced" ? "fenced" : "leased";
  }
  return s.replication === "replica" ? "replica" : "syncing";
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export function timelineSvg(input: {
  readonly samples: readonly StatusSample[];
  readonly faults: readonly FaultRecord[];
  readonly acks: readonly Ack[];
  readonly endMs: number;
  readonly nodeIds: Record<NodeName, string>;
  readonly title: string;
}): string {
  const endMs = Math.max(1, input.endMs);
  const WIDTH = Math.round(
    Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, LEFT + RIGHT + (endMs / 1000) * PX_PER_S)),
  );
  // About one throughput point every 2 px.
  const BUCKET_MS = Math.max(100, Math.ceil(endMs / ((WIDTH - LEFT - RIGHT) / 2) / 50) * 50);
  const x = (ms: number) =>
    LEFT + (Math.max(0, Math.min(ms, endMs)) / endMs) * (WIDTH - LEFT - RIGHT);
  const lanesTop = 40;
  const lanesBottom = lanesTop + NODE_NAMES.length * (LANE_H + LANE_GAP);
  const chartTop = lanesBottom + 20;
  const axisY = chartTop + CHART_H;
  const legendY = axisY + 40;
  const height = legendY + 20 * Math.ceil(Object.keys(COLORS).length / 4) + 30;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${LEFT}" y="22" font-size="15" font-weight="bold">${esc(input.title)}</text>`,
  );
  // Node lanes: a segment per run of equal state, then the epoch labels on top.
  const labels: string[] = [];
  NODE_NAMES.forEach((n, i) => {
    const y = lanesTop + i * (LANE_H + LANE_GAP);
    out.push(`<text x="8" y="${y + LANE_H / 2 + 4}">${esc(input.nodeIds[n])}</text>`);
    out.push(
      `<rect x="${LEFT}" y="${y}" width="${WIDTH - LEFT - RIGHT}" height="${LANE_H}" fill="${COLORS.down!.fill}"/>`,
    );
    const mine = input.samples.filter((s) => s.node === n);
    let lastEpoch: number | undefined;
    let lastLabelX = -Infinity;
    for (let j = 0; j < mine.length; ) {
      const s = mine[j]!;
      const st = stateOf(s);
      let k = j + 1;
      while (k < mine.length && stateOf(mine[k]!) === st) k++;
      const next = mine[k]?.atMs ?? endMs;
      out.push(
        `<rect x="${x(s.atMs).toFixed(1)}" y="${y}" width="${Math.max(0.5, x(next) - x(s.atMs)).toFixed(1)}" height="${LANE_H}" fill="${COLORS[st]!.fill}"><title>${esc(`${input.nodeIds[n]}: ${COLORS[st]!.label} from ${(s.atMs / 1000).toFixed(1)} s`)}</title></rect>`,
      );
      j = k;
    }
    for (const s of mine) {
      if (s.epoch !== undefined && s.epoch !== lastEpoch && s.reachable) {
        lastEpoch = s.epoch;
        if (x(s.atMs) - lastLabelX < LABEL_GAP) continue;
        lastLabelX = x(s.atMs);
        labels.push(
          `<text x="${(x(s.atMs) + 3).toFixed(1)}" y="${y + LANE_H - 8}" fill="white" font-size="11" font-weight="bold">e${s.epoch}</text>`,
        );
      }
    }
  });
  out.push(...labels);
  // Fault bands across lanes and chart.
  let lastFaultLabelX = -Infinity;
  for (const f of input.faults) {
    if (f.startMs === undefined) continue;
    const end = Math.max(f.endMs ?? f.startMs, f.startMs + 150);
    const x0 = x(f.startMs);
    out.push(
      `<rect x="${x0.toFixed(1)}" y="${lanesTop - 6}" width="${Math.max(2, x(end) - x0).toFixed(1)}" height="${axisY - lanesTop + 6}" fill="#d32f2f" fill-opacity="0.18" stroke="#d32f2f" stroke-opacity="0.6"><title>${esc(`#${f.plan.index} ${f.description}${f.failoverMs === undefined ? "" : `; failover ${Math.round(f.failoverMs)} ms`}`)}</title></rect>`,
    );
    if (x0 - lastFaultLabelX >= LABEL_GAP * 2) {
      lastFaultLabelX = x0;
      out.push(
        `<text x="${(x0 + 2).toFixed(1)}" y="${lanesTop - 9}" font-size="10" fill="#b71c1c">${esc(f.plan.kind)}</text>`,
      );
    }
  }
  // Throughput: acknowledgements per bucket, as frames a second.
  const buckets = new Array<number>(Math.ceil(endMs / BUCKET_MS) + 1).fill(0);
  for (const a of input.acks) {
    const b = Math.floor(a.atMs / BUCKET_MS);
    if (b >= 0 && b < buckets.length) buckets[b]!++;
  }
  const perSecond = buckets.map((n) => (n * 1000) / BUCKET_MS);
  const top = Math.max(10, ...perSecond);
  const y = (v: number) => axisY - (v / top) * CHART_H;
  const points = perSecond.map(
    (v, i) => `${x(i * BUCKET_MS + BUCKET_MS / 2).toFixed(1)},${y(v).toFixed(1)}`,
  );
  out.push(
    `<line x1="${LEFT}" y1="${axisY}" x2="${WIDTH - RIGHT}" y2="${axisY}" stroke="#555"/>`,
    `<line x1="${LEFT}" y1="${chartTop}" x2="${LEFT}" y2="${axisY}" stroke="#555"/>`,
    `<text x="8" y="${chartTop + 12}">acks/s</text>`,
    `<text x="${LEFT - 6}" y="${chartTop + 4}" text-anchor="end" font-size="10">${Math.round(top)}</text>`,
    `<text x="${LEFT - 6}" y="${axisY}" text-anchor="end" font-size="10">0</text>`,
    `<polyline fill="none" stroke="#263238" stroke-width="1.2" points="${points.join(" ")}"/>`,
  );
  // Time axis.
  const stepS = niceStep(endMs / 1000 / 12);
  for (let t = 0; t * 1000 <= endMs; t += stepS) {
    const tx = x(t * 1000).toFixed(1);
    out.push(
      `<line x1="${tx}" y1="${axisY}" x2="${tx}" y2="${axisY + 4}" stroke="#555"/>`,
      `<text x="${tx}" y="${axisY + 16}" text-anchor="middle" font-size="10">${t}s</text>`,
    );
  }
  // Legend.
  Object.values(COLORS).forEach((c, i) => {
    const lx = LEFT + (i % 4) * 270;
    const ly = legendY + Math.floor(i / 4) * 20;
    out.push(
      `<rect x="${lx}" y="${ly - 10}" width="14" height="12" fill="${c.fill}" stroke="#999"/>`,
      `<text x="${lx + 20}" y="${ly}">${esc(c.label)}</text>`,
    );
  });
  const ly = legendY + 20 * Math.ceil(Object.keys(COLORS).length / 4);
  out.push(
    `<rect x="${LEFT}" y="${ly - 10}" width="14" height="12" fill="#d32f2f" fill-opacity="0.18" stroke="#d32f2f"/>`,
    `<text x="${LEFT + 20}" y="${ly}">fault (start to undo); eN = epoch</text>`,
    "</svg>",
  );
  return out.join("\n");
}

function niceStep(raw: number): number {
  for (const s of [1, 2, 5, 10, 15, 30, 60, 120, 300, 600]) if (s >= raw) return s;
  return 1200;
}
