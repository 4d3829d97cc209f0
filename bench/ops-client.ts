// What the benchmarks read from a node's ops server: GET /v1/status and the Prometheus text
// of GET /metrics, and waiting for a state to be reached.
import type { NodeProcess } from "./node-process.js";
import { sleepMs } from "./timing.js";

const POLL_MS = 20;

export interface ReplicationStatus {
  readonly state: string;
  readonly connected: boolean;
  /** What the standby lacks (primary's view). */
  readonly lag: { readonly entries: number; readonly bytes: number; readonly seconds: number };
  readonly lastSnapshot: { readonly bytes: number; readonly seconds: number } | null;
  /** The snapshot in progress (primary): buffer bytes covered by acknowledged chunks. */
  readonly snapshot?: { readonly totalBytes: number; readonly doneBytes: number } | null;
}

export interface NodeStatus {
  readonly role: string;
  readonly replication: ReplicationStatus | null;
  readonly [field: string]: unknown;
}

/** `timeoutMs` bounds the request (a node whose loop is blocked answers late). */
const bounded = (timeoutMs: number | undefined) =>
  timeoutMs === undefined ? {} : { signal: AbortSignal.timeout(timeoutMs) };

export async function status(node: NodeProcess, timeoutMs?: number): Promise<NodeStatus> {
  const response = await fetch(`${node.ops}/v1/status`, bounded(timeoutMs));
  if (!response.ok) throw new Error(`${node.label}: GET /v1/status ${response.status}`);
  return (await response.json()) as NodeStatus;
}

/** Prometheus samples of one scrape, keyed by `name{labels}` as written. */
export type Samples = ReadonlyMap<string, number>;

export async function scrape(node: NodeProcess, timeoutMs?: number): Promise<Samples> {
  const response = await fetch(`${node.ops}/metrics`, bounded(timeoutMs));
  if (!response.ok) throw new Error(`${node.label}: GET /metrics ${response.status}`);
  const samples = new Map<string, number>();
  for (const line of (await response.text()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

/** The sum of the samples of `name` whose labels include every one in `labels`. */
export function sampleSum(
  samples: Samples,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const [key, value] of samples) {
    const brace = key.indexOf("{");
    if ((brace < 0 ? key : key.slice(0, brace)) !== name) continue;
    if (wanted.every((w) => key.includes(w))) sum += value;
  }
  return sum;
}

/** Polls `probe` until it returns a value; throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`not ${what} after ${timeoutMs} ms`);
    await sleepMs(POLL_MS);
  }
}

/** Until the primary streams to its standby (the snapshot, if any, is done). */
export function waitStreaming(primary: NodeProcess, timeoutMs = 120_000): Promise<NodeStatus> {
  return waitFor(`streaming (${primary.label})`, timeoutMs, async () => {
    const s = await status(primary);
    return s.replication?.state === "streaming" ? s : undefined;
  });
}
