// A guest as the simulator runs it: a mirror of the client library's Session
// (packages/client/src/session.ts) and connect() (connection.ts), with the library's own
// FrameWindow. It keeps every frame not yet acknowledged; when its stream breaks, a keepalive
// ping goes unanswered, or the node says NOT_PRIMARY, it reconnects (to the redirect, else the
// next endpoint), resumes its session, refuses a node of an older epoch, fails the session
// when the node lacks frames it had acknowledged, and re-sends the rest; replies from an
// epoch older than one seen are ignored. The async functions are small state machines on the
// guest's own timers. Differences: the first open is retried by the test's guest until a
// node serves it (an application's choice); failoverTimeoutMs is unbounded (the simulator
// bounds liveness itself).
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { create } from "@bufbuild/protobuf";
import {
  type CallResult,
  decodeResult,
  ErrorCode,
  encodeFrame,
  type FrameBody,
  wire,
} from "@vgpu-ha/common";
import type * as FrameWindowModule from "../../../packages/client/src/frame-window.js";
import type { SimRng } from "../rng.js";
import type { End } from "./net.js";
import type { NodeName } from "./params.js";
import type { SimProcess } from "./process.js";
import { CLUSTER, GUEST_TOKEN } from "./roles.js";

// The client package does not export its FrameWindow: load it from beside its entry point.
const clientEntry = createRequire(import.meta.url).resolve("@vgpu-ha/client");
const { FrameWindow }: typeof FrameWindowModule = await import(
  pathToFileURL(join(dirname(clientEntry), "frame-window.js")).href
);
type FrameWindow = InstanceType<typeof FrameWindow>;

type Conn = End<wire.GuestMessage, wire.NodeMessage>;
type Opened = wire.Opened;

/** Codes after which trying another node cannot help (session.ts FATAL). */
const FATAL = new Set<ErrorCode>([
  ErrorCode.UNAUTHENTICATED,
  ErrorCode.UNKNOWN_SESSION,
  ErrorCode.LIMIT_EXCEEDED,
  ErrorCode.MALFORMED,
]);

export interface GuestError {
  readonly code: ErrorCode;
  readonly message: string;
  readonly redirect: string;
  /** The node answered with this error (a RedirectError), rather than the stream failing. */
  readonly answered?: boolean;
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

interface Attempt {
  readonly conn: Conn;
  phase: "connecting" | "attached" | "dropped";
  pingTimer: boolean;
}

export class SimGuest {
  readonly options: GuestOptions;
  private readonly env: GuestEnv;
  sessionId: string | undefined;
  nodeId: NodeName | undefined;
  epoch = 0;
  resumes = 0;
  window: FrameWindow | undefined;
  failure: GuestError | undefined;
  private conn: Conn | undefined;
  private readonly attempts = new Map<Conn, Attempt>();
  private endpointIndex = 0;
  private reconnecting = false;
  private sendScheduled = false;
  /** Frames pushed (issued) so far. */
  pushed = 0;

  constructor(options: GuestOptions, env: GuestEnv) {
    this.options = options;
    this.env = env;
  }

  get isOpen(): boolean {
    return this.window !== undefined && this.failure === undefined;
  }

  /** Frames issued and not yet settled. */
  get unsettled(): number {
    return this.window?.size ?? 0;
  }

  // ---- opening (Session.open, retried by the application) ----

  open(): void {
    this.tryOpen(0);
  }

  private tryOpen(index: number): void {
    const { endpoints } = this.options;
    if (index >= endpoints.length) {
      // No node serves now: the application tries again a little later.
      this.env.proc.setTimeout(this.options.retryMaxMs, () => this.tryOpen(0));
      return;
    }
    const endpoint = endpoints[index]!;
    this.connect(endpoint, "", this.options.connectTimeoutMs, (conn, opened, error) => {
      if (conn && opened) {
        this.sessionId = opened.sessionId;
        this.nodeId = opened.nodeId as NodeName;
        this.epoch = Number(opened.epoch);
        this.endpointIndex = Math.max(0, endpoints.indexOf(endpoint));
        this.window = new FrameWindow(Number(opened.lastFrame));
        this.attach(conn);
        this.env.progress();
        return;
      }
      if (error && FATAL.has(error.code)) {
        this.fail(error);
        return;
      }
      this.tryOpen(index + 1);
    });
  }

  // ---- one stream (connection.ts connect) ----

  private connect(
    endpoint: NodeName,
    resumeSessionId: string,
    timeoutMs: number,
    done: (
      conn: Conn | undefined,
      opened: Opened | undefined,
      error: GuestError | undefined,
    ) => void,
  ): void {
    const conn = this.env.dial(endpoint, timeoutMs);
    const attempt: Attempt = { conn, phase: "connecting", pingTimer: false };
    this.attempts.set(conn, attempt);
    let answered = false;
    const answer = (opened: Opened | undefined, error: GuestError | undefined) => {
      if (answered) return;
      answered = true;
      if (opened) {
        done(conn, opened, undefined);
      } else {
        this.drop(conn);
        done(undefined, undefined, error);
      }
    };
    conn.onMessage((m) => {
      if (attempt.phase === "connecting") {
        const k = m.kind;
        if (k.case === "opened") answer(k.value, undefined);
        else if (k.case === "error") {
          const { code, message, redirect } = k.value;
          answer(undefined, { code, message: `${endpoint}: ${message}`, redirect, answered: true });
        } else
          answer(undefined, {
            code: ErrorCode.MALFORMED,
            message: `unexpected ${k.case}`,
            redirect: "",
          });
        return;
      }
      if (attempt.phase === "attached") this.onMessage(conn, m);
    });
    conn.onClose((reason) => {
      if (attempt.phase === "connecting") {
        answer(undefined, {
          code: ErrorCode.NOT_PRIMARY,
          message: `${endpoint}: ${reason}`,
          redirect: "",
        });
      } else if (attempt.phase === "attached") {
        this.lost(conn, { code: ErrorCode.NOT_PRIMARY, message: reason, redirect: "" });
      }
    });
    const open = {
      tenant: this.options.tenant,
      token: GUEST_TOKEN,
      resumeSessionId,
      clusterId: CLUSTER,
    };
    conn.send(create(wire.GuestMessageSchema, { kind: { case: "open", value: open } }));
    this.env.proc.setTimeout(timeoutMs, () =>
      answer(undefined, {
        code: ErrorCode.NOT_PRIMARY,
        message: `${endpoint}: no answer in ${timeoutMs} ms`,
        redirect: "",
      }),
    );
    this.keepalive(attempt);
  }

  /** grpc keepalive: a ping every keepaliveMs; no answer within keepaliveMs ends the stream. */
  private keepalive(attempt: Attempt): void {
    const { proc } = this.env;
    const ping = () => {
      if (attempt.phase === "dropped" || !attempt.conn.isOpen) return;
      let answered = false;
      attempt.conn.onPong = () => {
        answered = true;
      };
      attempt.conn.ping();
      proc.setTimeout(this.options.keepaliveMs, () => {
        if (attempt.phase === "dropped" || !attempt.conn.isOpen) return;
        if (!answered) {
          attempt.conn.close("keepalive timeout");
          return;
        }
        ping();
      });
    };
    proc.setTimeout(this.options.keepaliveMs, ping);
  }

  private drop(conn: Conn): void {
    const attempt = this.attempts.get(conn);
    if (attempt) attempt.phase = "dropped";
    this.attempts.delete(conn);
    conn.close("cancelled");
  }

  // ---- the session (session.ts) ----

  private attach(conn: Conn): void {
    this.conn = conn;
    this.attempts.get(conn)!.phase = "attached";
    this.send();
  }

  private lost(conn: Conn, error: GuestError): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    this.drop(conn);
    if (FATAL.has(error.code)) {
      this.fail(error);
      return;
    }
    this.reconnect(error, error.redirect !== "" ? (error.redirect as NodeName) : undefined);
  }

  private reconnect(cause: GuestError, preferred: NodeName | undefined): void {
    if (this.reconnecting || this.failure) return;
    this.reconnecting = true;
    const { endpoints } = this.options;
    let attempt = 0;
    let next = preferred;
    let lastError = cause;
    let failed: NodeName | undefined;
    const unknownAt = new Set<NodeName>();
    const standbyAt = new Set<NodeName>();
    let unknownError: GuestError | undefined;
    const loop = () => {
      if (this.failure) return;
      if (next === failed) next = undefined;
      if (next === undefined) this.endpointIndex = (this.endpointIndex + 1) % endpoints.length;
      const endpoint = next ?? endpoints[this.endpointIndex]!;
      next = undefined;
      this.connect(
        endpoint,
        this.sessionId!,
        this.options.connectTimeoutMs,
        (conn, opened, error) => {
          if (conn && opened) {
            if (this.resume(conn, opened, endpoint)) return;
            this.drop(conn);
          } else if (error) {
            lastError = error;
            // session.ts: UNKNOWN_SESSION is fatal only once no other node can serve the session.
            const unknown = error.code === ErrorCode.UNKNOWN_SESSION;
            if (unknown) {
              unknownAt.add(endpoint);
              unknownError = error;
            } else if (FATAL.has(error.code)) {
              this.reconnecting = false;
              this.fail(lastError);
              return;
            }
            if (unknown) failed = endpoint;
            else if (error.redirect !== "") next = error.redirect as NodeName;
            else failed = endpoint;
            if (error.answered && error.code === ErrorCode.NOT_PRIMARY) standbyAt.add(endpoint);
            const lost = endpoints.every((x) => unknownAt.has(x) || standbyAt.has(x));
            if (unknownError && lost) {
              this.reconnecting = false;
              this.fail(unknownError);
              return;
            }
          }
          attempt++;
          const backoff = Math.min(this.options.retryMaxMs, 10 * 2 ** Math.min(attempt, 12));
          this.env.proc.setTimeout(backoff * (0.5 + this.env.rng.unit() / 2), loop);
        },
      );
    };
    loop();
  }

  private resume(conn: Conn, opened: Opened, endpoint: NodeName): boolean {
    const epoch = Number(opened.epoch);
    const lastFrame = Number(opened.lastFrame);
    if (epoch < this.epoch) return false;
    const answered = this.window!.settledThrough;
    this.reconnecting = false;
    if (lastFrame < answered) {
      this.drop(conn);
      this.fail({
        code: ErrorCode.FRAME_OUT_OF_ORDER,
        message: `${opened.nodeId} has frame ${lastFrame} but ${answered} were acknowledged: ${answered - lastFrame} lost`,
        redirect: "",
      });
      return true;
    }
    this.epoch = epoch;
    this.nodeId = opened.nodeId as NodeName;
    // Reached by a redirect too: the next failover starts from the other endpoint.
    const index = this.options.endpoints.indexOf(endpoint);
    if (index >= 0) this.endpointIndex = index;
    this.resumes++;
    this.attach(conn);
    this.window!.rewind();
    this.send();
    return true;
  }

  /** The application sends one frame; the FrameWindow numbers it. */
  push(body: FrameBody): number {
    const window = this.window!;
    const number = window.settledThrough + window.size + 1;
    window.push(body).catch(() => undefined);
    this.pushed++;
    if (!this.sendScheduled) {
      this.sendScheduled = true;
      this.env.proc.defer(() => {
        this.sendScheduled = false;
        this.send();
      });
    }
    return number;
  }

  private send(): void {
    const conn = this.conn;
    const window = this.window;
    if (conn === undefined || window === undefined) return;
    for (;;) {
      const room = Math.min(256, 1024 - window.inFlight);
      if (room <= 0) return;
      const frames = window.takeUnsent(room);
      if (frames.length === 0) return;
      conn.send(
        create(wire.GuestMessageSchema, {
          kind: { case: "frames", value: { frames: frames.map(encodeFrame) } },
        }),
      );
    }
  }

  private onMessage(conn: Conn, m: wire.NodeMessage): void {
    if (this.conn !== conn) return;
    const k = m.kind;
    switch (k.case) {
      case "acks": {
        const epoch = Number(k.value.epoch);
        if (epoch < this.epoch) return;
        this.epoch = epoch;
        const window = this.window!;
        for (const r of k.value.results) {
          const before = window.settledThrough;
          const frame = Number(r.frame);
          const result = decodeResult(r.result);
          window.settle(frame, result);
          if (window.settledThrough > before) this.env.settled(this, frame, result, m);
        }
        this.send();
        this.env.progress();
        return;
      }
      case "error":
        this.lost(conn, k.value);
        return;
      default:
        return;
    }
  }

  private fail(error: GuestError): void {
    if (this.failure) return;
    this.failure = error;
    this.window?.failAll(new Error(error.message));
    if (this.conn) this.drop(this.conn);
    this.conn = undefined;
    this.env.progress();
  }

  describe(): string {
    if (this.failure) return `${this.options.name} failed ${ErrorCode[this.failure.code]}`;
    if (!this.window) return `${this.options.name} opening`;
    return `${this.options.name}@${this.nodeId}e${this.epoch} ${this.window.settledThrough}+${this.window.size}${this.reconnecting ? " reconnecting" : ""}`;
  }
}
