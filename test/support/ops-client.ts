// Reads a node's ops HTTP port the way an operator would (status, digest, Prometheus metrics,
// verify, test fault injection), and waits for conditions without fixed sleeps.
import type { SessionView } from "@vgpu-ha/common";

export interface OpsNode {
  /** Base URL of the node's ops server. */
  readonly ops: string;
}

/** The parts of GET /v1/status the tests read (both roles). */
export interface NodeStatus {
  readonly role: string;
  readonly epoch: number;
  readonly seq: {
    last: number;
    applied: number;
    acknowledged: number;
    /** A standby's received seq (issue #14: received ≥ applied; absent before it). */
    received?: number;
  };
  readonly contexts: number;
  readonly bos: number;
  readonly sessions: number;
  readonly replication: {
    /** Primary: disconnected|hello|snapshot|streaming; standby: empty|snapshot|replica|diverged. */
    readonly state: string;
    readonly connected: boolean;
    readonly eligible?: boolean;
    readonly divergences?: number;
    /** null on a primary without a standby. */
    readonly lag: { entries: number; bytes?: number } | null;
    readonly snapshot: { snapshotId: number; chunks?: number; chunksAcked?: number } | null;
    /** Standby: snapshot pulls opened since start (null: pages come on the stream). */
    readonly snapshotPulls?: number | null;
    readonly snapshotPulledBytes?: { readonly inPlace: number; readonly copied: number } | null;
    readonly lastSnapshot?: { bytes: number; seconds: number } | null;
    readonly heldReplies?: number;
    readonly log?: { firstRetainedSeq: number; heldEntries: number; heldBytes: number };
    /** What the peer runs, from its last hello (null: none yet). */
    readonly peerVersion?: {
      version: string;
      protocolVersion: number;
      kernelContract?: number;
      device?: string;
    } | null;
  } | null;
  /** The kernel contract this node's device implements. */
  readonly kernelContractVersion?: number;
  readonly maintenance?: { paused: boolean; by?: string; since?: string };
  /** The history the node's state belongs to (docs/replication.md#lineage); null: none yet. */
  readonly lineage?: string | null;
  readonly [key: string]: unknown;
}

export interface NodeDigest {
  readonly nodeId: string;
  readonly seq: number;
  readonly state: string;
  readonly [key: string]: unknown;
}

export interface VerifyAnswer {
  readonly equal: boolean;
  readonly seq: number;
  readonly primary: string;
  readonly standby: string;
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

export const status = (node: OpsNode) => getJson<NodeStatus>(`${node.ops}/v1/status`);
export const digest = (node: OpsNode) => getJson<NodeDigest>(`${node.ops}/v1/digest`);

async function post(node: OpsNode, path: string, token: string): Promise<Response> {
  return fetch(`${node.ops}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
  });
}

/**
 * POST /v1/verify on the primary; throws unless the node answers 200. While the primary says
 * it has no standby in sync (a standby that just installed its snapshot is a moment ahead of
 * the primary's view), it asks again, for up to 10 s.
 */
export async function verify(primary: OpsNode, token: string): Promise<VerifyAnswer> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const res = await post(primary, "/v1/verify", token);
    const body = await res.text();
    if (res.status === 200) return JSON.parse(body) as VerifyAnswer;
    if (
      res.status !== 409 ||
      !body.includes('"code":"NO_STANDBY_IN_SYNC"') ||
      performance.now() > deadline
    ) {
      throw new Error(`verify: ${res.status} ${body}`);
    }
    await sleep(50);
  }
}

/** POST /v1/test/corrupt on the standby: which buffer byte it flipped. */
export async function corrupt(
  standby: OpsNode,
  token: string,
): Promise<{ context: number; bo: number; offset: number }> {
  const res = await post(standby, "/v1/test/corrupt", token);
  const body = await res.text();
  if (res.status !== 200) throw new Error(`corrupt: ${res.status} ${body}`);
  return JSON.parse(body) as { context: number; bo: number; offset: number };
}

/** One scrape of GET /metrics. */
export class Metrics {
  private readonly samples: { name: string; labels: Record<string, string>; value: number }[] = [];

  constructor(text: string) {
    for (const line of text.split("\n")) {
      if (line === "" || line.startsWith("#")) continue;
      const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
      if (!m) continue;
      const labels: Record<string, string> = {};
      for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
      this.samples.push({ name: m[1]!, labels, value: Number(m[3]) });
    }
  }

  /** The sum of the samples of `name` whose labels include `labels`; 0 when there are none. */
  get(name: string, labels: Record<string, string> = {}): number {
    let sum = 0;
    for (const s of this.samples) {
      if (s.name !== name) continue;
      if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
    }
    return sum;
  }
}

export async function metrics(node: OpsNode): Promise<Metrics> {
  const res = await fetch(`${node.ops}/metrics`);
  if (!res.ok) throw new Error(`GET /metrics: ${res.status}`);
  return new Metrics(await res.text());
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` until it returns something other than undefined or false, and returns that.
 * The timeout is a generous bound for a hung test, never a performance assertion.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = performance.now() + (options.timeoutMs ?? 45_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (e) {
      lastError = e; // the node may be restarting: keep polling
    }
    if (performance.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(`timed out waiting for ${what}${why}`);
    }
    await sleep(options.intervalMs ?? 25);
  }
}

/** GET /v1/sessions (admin token), of one tenant when given. */
export async function sessions(
  node: OpsNode,
  token: string,
  tenant?: string,
): Promise<SessionView[]> {
  const query = tenant === undefined ? "" : `?tenant=${encodeURIComponent(tenant)}`;
  const res = await fetch(`${node.ops}/v1/sessions${query}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET /v1/sessions: ${res.status} ${body}`);
  return (JSON.parse(body) as { sessions: SessionView[] }).sessions;
}
