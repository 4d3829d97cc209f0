// What an attack tool saw from its side: how much it sent and how the target answered. The
// node's own view (refusals counted, epochs, memory) is read by the observer, not here.

export interface AttackOutcome {
  /** Connections, streams, hellos or requests sent, by kind. */
  readonly sent: Record<string, number>;
  /** How the target answered, by kind of answer (error codes, GOAWAY, closes, HTTP statuses). */
  readonly answers: Record<string, number>;
  /** One line of what happened, for the report. */
  readonly note: string;
}

/** A counter of named events (answers, sends). */
export class Tally {
  readonly counts: Record<string, number> = {};
  add(key: string, n = 1): void {
    this.counts[key] = (this.counts[key] ?? 0) + n;
  }
  get(key: string): number {
    return this.counts[key] ?? 0;
  }
}

/** TLS material an attacker dials with (PEM file paths). */
export interface AttackerTls {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
  /** The name the server's certificate must carry. */
  readonly serverName: string;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
