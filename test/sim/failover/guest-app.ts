// A simulated guest: an application on the shipped client library. Its Session (packages/client)
// runs over the simulator's ports — streams of the simulated network as NodeStreams (with
// gRPC's keepalive: a ping every keepaliveMs, the stream ended when one goes unanswered), the
// guests' process for timers, clock and deferred sends, the guest's own seeded jitter — and
// reports each settled frame, with the reply that settled it, to the checker. What is the
// application's: a first open that no node serves is tried again after retryMaxMs (until one
// does), and failoverTimeoutMs is unbounded (the simulator bounds liveness itself).
import { FATAL, type NodeStream, Session, SessionClosedError } from "@vgpu-ha/client";
import { type CallResult, ErrorCode, type FrameBody, type wire } from "@vgpu-ha/common";
import type { SimRng } from "../rng.js";
import type { End } from "./net.js";
import type { NodeName } from "./params.js";
import type { SimProcess } from "./process.js";
import { CLUSTER, GUEST_TOKEN } from "./roles.js";

type Conn = End<wire.GuestMessage, wire.NodeMessage>;

export interface GuestFailure {
  readonly code: ErrorCode;
  readonly message: string;
}

export interface GuestOptions {
  readonly name: string;
  readonly workloadSession: string;
  readonly tenant: string;
  readonly endpoints: readonly NodeName[];
  readonly keepaliveMs: number;
  readonly connectTimeoutMs: number;
  readonly retryMaxMs: number;
}

export interface GuestEnv {
  readonly proc: SimProcess;
  readonly rng: SimRng;
  /** Opens a guest stream to a node's guest port. */
  readonly dial: (node: NodeName, timeoutMs: number) => Conn;
  /** The guest settled a frame with this result, from this reply. */
  readonly settled: (
    guest: SimGuest,
    frame: number,
    result: CallResult,
    reply: wire.NodeMessage,
  ) => void;
  /** Something changed (opened, settled, failed): the issuer may go on. */
  readonly progress: () => void;
}

export class SimGuest {
  readonly options: GuestOptions;
  private readonly env: GuestEnv;

  constructor(options: GuestOptions, env: GuestEnv) {
    this.options = options;
    this.env = env;
  }

  /** The library's session, once one opened; why none could be opened (a fatal answer). */
  private session: Session | undefined;
  private openFailure: GuestFailure | undefined;

  get sessionId(): string | undefined {
    return this.session?.id;
  }

  get failure(): GuestFailure | undefined {
    const e = this.session?.failure;
    if (e === undefined) return this.openFailure;
    return {
      code: e instanceof SessionClosedError ? e.code : ErrorCode.NOT_PRIMARY,
      message: e.message,
    };
  }

  get isOpen(): boolean {
    return this.session !== undefined && this.failure === undefined;
  }

  /** Frames issued and not yet settled. */
  get unsettled(): number {
    return this.session?.unsettled ?? 0;
  }

  get resumes(): number {
    return this.session?.resumes ?? 0;
  }

  /** Opens the session (Session.start); a non-fatal failure is tried again later. */
  open(): void {
    const { options, env } = this;
    const { proc } = env;
    Session.start(
      {
        endpoints: options.endpoints,
        tenant: options.tenant,
        token: GUEST_TOKEN,
        clusterId: CLUSTER,
        connectTimeoutMs: options.connectTimeoutMs,
        retryMaxMs: options.retryMaxMs,
        failoverTimeoutMs: Number.POSITIVE_INFINITY,
      },
      {
        dial: (endpoint) => this.dial(endpoint as NodeName),
        timers: proc,
        nowMs: () => proc.now(),
        random: () => env.rng.unit(),
        defer: (fn) => proc.defer(fn),
        observer: {
          settled: (frame, result, reply) => env.settled(this, frame, result, reply),
          changed: () => env.progress(),
        },
      },
      (error, session) => {
        if (session !== undefined) {
          this.session = session;
          return;
        }
        const code = error instanceof SessionClosedError ? error.code : ErrorCode.NOT_PRIMARY;
        if (FATAL.has(code)) {
          this.openFailure = { code, message: error?.message ?? "" };
          env.progress();
          return;
        }
        // No node serves now: the application tries again a little later.
        proc.setTimeout(options.retryMaxMs, () => this.open());
      },
    );
  }

  /** The application sends one frame; the library numbers it. */
  push(body: FrameBody): number {
    return this.session!.frame(body);
  }

  /** A stream of the simulated network as the library's NodeStream, with gRPC's keepalive. */
  private dial(endpoint: NodeName): NodeStream {
    const { proc } = this.env;
    const conn = this.env.dial(endpoint, this.options.connectTimeoutMs);
    let handlers: Parameters<NodeStream["listen"]>[0] | undefined;
    let dropped = false;
    conn.onMessage((m) => handlers?.message(m));
    conn.onClose((reason) => handlers?.closed(reason));
    const keepaliveMs = this.options.keepaliveMs;
    const ping = () => {
      if (dropped || !conn.isOpen) return;
      let answered = false;
      conn.onPong = () => {
        answered = true;
      };
      conn.ping();
      proc.setTimeout(keepaliveMs, () => {
        if (dropped || !conn.isOpen) return;
        if (!answered) conn.close("keepalive timeout");
        else ping();
      });
    };
    let pinging = false;
    return {
      send: (m) => {
        conn.send(m);
        // Keepalive starts with the stream's first message (the Open), as the guest dials.
        if (!pinging) proc.setTimeout(keepaliveMs, ping);
        pinging = true;
      },
      end: () => undefined, // simulated guests never close their sessions
      cancel: () => {
        dropped = true;
        handlers = undefined;
        conn.close("cancelled");
      },
      listen: (h) => {
        handlers = h;
      },
    };
  }

  describe(): string {
    const { name } = this.options;
    const failure = this.failure;
    if (failure) return `${name} failed ${ErrorCode[failure.code]}`;
    const s = this.session;
    if (!s) return `${name} opening`;
    return `${name}@${s.nodeId}e${s.epoch} ${s.settledThrough}+${s.unsettled}${s.reconnecting ? " reconnecting" : ""}`;
  }
}
