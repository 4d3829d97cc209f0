// A small client of one node's ops HTTP API: every request has a timeout, and every failure
// becomes a CliError whose exit code says what kind it was (unreachable, refused, other); a
// refusal's exit code is keyed on the catalogue code the node answered (exit-codes.ts).
import type { RoleChange } from "@vgpu-ha/common";
import { CliError, ExitCode, exitCodeFor } from "./exit-codes.js";

export type { RoleChange };

/** A snapshot under way, as the primary reports it (docs/status.schema.json). */
export interface ResyncStatus {
  readonly totalBytes: number;
  readonly doneBytes: number;
  readonly percent: number;
  readonly rateBytesPerSecond: number;
  readonly etaSeconds: number | null;
}

/** The parts of GET /v1/status that vgpuctl shows; the rest is passed through. */
export interface NodeStatus {
  readonly nodeId: string;
  readonly role: string;
  readonly epoch: number;
  readonly serving?: boolean;
  readonly degraded?: boolean;
  readonly replicationMode?: string | null;
  readonly tls?: { replication: boolean; guest: string };
  readonly maintenance?: {
    paused: boolean;
    since?: string;
    pausedSeconds?: number;
    by?: string;
  };
  readonly lastRoleChange?: (RoleChange & { ageSeconds: number }) | null;
  /** The history the node's state belongs to (docs/replication.md#lineage); null: none yet. */
  readonly lineage?: string | null;
  readonly lease?: { state: string; remainingSeconds: number } | null;
  readonly seq: { last: number; applied: number; acknowledged: number };
  readonly replication: {
    readonly state: string;
    readonly connected: boolean;
    readonly peer?: string;
    readonly eligible?: boolean;
    /** What the peer runs, from its last hello (null: no hello yet). */
    readonly peerVersion?: {
      readonly version: string;
      readonly protocolVersion: number;
      /** Its device's kernel contract and what the device is (absent: it did not say). */
      readonly kernelContract?: number;
      readonly device?: string;
    } | null;
    /** null on a primary without a standby. */
    readonly lag: { entries: number } | null;
    readonly snapshot?: ResyncStatus | null;
  } | null;
  readonly sessions: number;
  readonly vram: { usedBytes: number; totalBytes: number };
  readonly version?: string;
  readonly protocolVersion?: number;
  /** The kernel contract this node's device implements (docs/gpu-model.md). */
  readonly kernelContractVersion?: number;
  /** What runs the device: backend, contract, and for webgpu the adapter. */
  readonly device?: {
    readonly backend?: string;
    readonly description?: string | null;
    readonly fallbackReason?: string;
    readonly failed?: boolean;
  };
  readonly [key: string]: unknown;
}

export interface Readiness {
  readonly ready: boolean;
  readonly reason: string;
}

/** What one node answered: its status and readiness, or why it could not be read. */
export type NodeView =
  | { readonly url: string; readonly status: NodeStatus; readonly ready: Readiness }
  | {
      readonly url: string;
      /** "unreachable: <reason>", or the error answered. */
      readonly problem: string;
      readonly exitCode: ExitCode;
    };

export interface OpsClientOptions {
  readonly token?: string | undefined;
  readonly timeoutMs: number;
}

/** Why fetch failed, in words an operator knows ("connect ECONNREFUSED 127.0.0.1:1"). */
function reasonOf(e: unknown, timeoutMs: number): string {
  if (e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")) {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = (e as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const c = cause as Error & { code?: string };
    // undici refuses ports on the WHATWG "bad ports" list (1, 25, 6000, …) without connecting
    if (c.message === "bad port") return "bad port (fetch will not connect to this port)";
    return c.message || c.code || String(c);
  }
  return e instanceof Error ? e.message : String(e);
}

export class OpsClient {
  readonly url: string;
  private readonly options: OpsClientOptions;

  constructor(url: string, options: OpsClientOptions) {
    this.url = url.replace(/\/+$/, "");
    this.options = options;
  }

  status(): Promise<NodeStatus> {
    return this.request<NodeStatus>("GET", "/v1/status", [200]);
  }

  /** This node's role changes, oldest first. */
  async history(): Promise<RoleChange[]> {
    const body = await this.request<{ changes: RoleChange[] }>("GET", "/v1/history", [200]);
    return body.changes;
  }

  /** GET /readyz answers 503 with a reason when not ready: both are answers, not failures. */
  readiness(): Promise<Readiness> {
    return this.request<Readiness>("GET", "/readyz", [200, 503]);
  }

  /** Status and readiness; a node that cannot be read is a value here, not an error. */
  async view(): Promise<NodeView> {
    try {
      const [status, ready] = await Promise.all([this.status(), this.readiness()]);
      return { url: this.url, status, ready };
    } catch (e) {
      if (!(e instanceof CliError)) throw e;
      const problem = e.message.startsWith(`${this.url}: `)
        ? e.message.slice(this.url.length + 2)
        : e.message;
      return { url: this.url, problem, exitCode: e.exitCode };
    }
  }

  /** POST an admin action; `timeoutMs` overrides the default (switchover waits for the standby). */
  async admin(path: string, timeoutMs?: number): Promise<Record<string, unknown>> {
    this.needToken();
    return this.request("POST", path, [200], timeoutMs);
  }

  /** GET what only the admin token may read (the guest sessions). */
  async adminGet(path: string): Promise<Record<string, unknown>> {
    this.needToken();
    return this.request("GET", path, [200], undefined, true);
  }

  private needToken(): void {
    if (!this.options.token) {
      throw new CliError(ExitCode.usage, "no admin token: pass --token or set VGPUCTL_TOKEN");
    }
  }

  private async request<T = Record<string, unknown>>(
    method: "GET" | "POST",
    path: string,
    okStatuses: readonly number[],
    timeoutMs = this.options.timeoutMs,
    withToken = method === "POST",
  ): Promise<T> {
    const where = `${this.url}: ${method} ${path}`;
    const headers: Record<string, string> = {};
    if (withToken) headers.authorization = `Bearer ${this.options.token}`;
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers,
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await res.text();
    } catch (e) {
      throw new CliError(
        ExitCode.unreachable,
        `${this.url}: unreachable: ${reasonOf(e, timeoutMs)}`,
        { cause: e },
      );
    }
    const body = parse(text);
    if (okStatuses.includes(res.status) && body) return body as T;
    const said = typeof body?.message === "string" ? body.message : text.slice(0, 200);
    const code = typeof body?.code === "string" ? body.code : undefined;
    const message = code === undefined ? said : `${code}: ${said}`;
    throw new CliError(
      exitCodeFor(res.status, code),
      `${where}: ${res.status} ${message}`.trimEnd(),
    );
  }
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === "object" ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
