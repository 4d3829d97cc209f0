// Resync progress as vgpuctl prints it: a plain line (not a terminal, or --json off and piped)
// and a bar drawn by cli-progress on a terminal, in `status`, `watch` and `reinit`.
import cliProgress from "cli-progress";
import type { NodeStatus, ResyncStatus } from "./ops-client.js";

const MIB = 1024 * 1024;
const BAR_SIZE = 30;

const mib = (bytes: number) => (bytes / MIB).toFixed(1);

export function formatSeconds(s: number): string {
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

/** "45.2% (120.0 of 265.0 MiB) at 40.1 MiB/s, ETA 4 s", as drbdadm status gives it. */
export function resyncFigures(r: ResyncStatus): string {
  const eta = r.etaSeconds === null ? "ETA unknown" : `ETA ${formatSeconds(r.etaSeconds)}`;
  return `${r.percent.toFixed(1)}% (${mib(r.doneBytes)} of ${mib(r.totalBytes)} MiB) at ${mib(r.rateBytesPerSecond)} MiB/s, ${eta}`;
}

/** A bar of BAR_SIZE cells, drawn by cli-progress's formatter. */
export function bar(fraction: number): string {
  return cliProgress.Format.BarFormat(Math.min(1, Math.max(0, fraction)), {
    barsize: BAR_SIZE,
    barCompleteString: "\u2588".repeat(BAR_SIZE),
    barIncompleteString: "\u2591".repeat(BAR_SIZE),
    barGlue: "",
  });
}

/** The resync line of a primary sending a snapshot, or undefined when none is under way. */
export function resyncLine(s: NodeStatus, tty: boolean): string | undefined {
  const r = s.replication?.snapshot;
  if (!r || typeof r.totalBytes !== "number") return undefined;
  const who = `resync ${s.nodeId} → ${s.replication?.peer ?? "standby"}`;
  return tty
    ? `${who}: ${bar(r.percent / 100)} ${resyncFigures(r)}`
    : `${who}: ${resyncFigures(r)}`;
}

/** A live bar for a command that waits on a resync (reinit); plain lines when not a TTY. */
export class ResyncBar {
  private readonly bar: cliProgress.SingleBar | undefined;
  private started = false;
  private readonly out: (line: string) => void;

  constructor(tty: boolean, out: (line: string) => void) {
    this.out = out;
    this.bar = tty
      ? new cliProgress.SingleBar(
          {
            format: "resync {bar} {percentage}% | {done} of {total} MiB | {rate} MiB/s | ETA {eta}",
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  }

  update(r: ResyncStatus): void {
    if (!this.bar) {
      this.out(`resync: ${resyncFigures(r)}`);
      return;
    }
    const payload = {
      done: mib(r.doneBytes),
      total: mib(r.totalBytes),
      rate: mib(r.rateBytesPerSecond),
      eta: r.etaSeconds === null ? "?" : formatSeconds(r.etaSeconds),
    };
    if (!this.started) {
      this.started = true;
      this.bar.start(Math.max(1, r.totalBytes), r.doneBytes, payload);
    }
    this.bar.setTotal(Math.max(1, r.totalBytes));
    this.bar.update(r.doneBytes, payload);
  }

  stop(): void {
    if (this.started) this.bar?.stop();
  }
}
