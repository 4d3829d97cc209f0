// A GuestService in memory, for tests and fuzzers: a backend, a log and a sequencer as a
// standalone node has them, and fake gRPC streams that record what the node writes. Nothing
// listens; a test sends messages into a stream and reads what came back.
import { EventEmitter } from "node:events";
import type { PeerCertificate } from "node:tls";
import {
  createLogger,
  createMetrics,
  idleGauges,
  ReplicationLog,
  type wire,
} from "@vgpu-ha/common";
import { Backend, type BackendOptions } from "@vgpu-ha/gpu-model";
import { IdleSessions } from "../core/idle-sessions.js";
import { Sequencer } from "../core/sequencer.js";
import { SessionAdmission, type SessionAdmissionLimits } from "../core/session-admission.js";
import { GuestService } from "../guest-service.js";
import { TenantAuth, type TenantCredentials } from "../tenant-auth.js";

/** A server stream that records what the node writes to it. */
export class FakeGuestStream extends EventEmitter {
  readonly written: wire.NodeMessage[] = [];
  ended = false;
  paused = false;
  private readonly certificate: PeerCertificate | undefined;

  constructor(certificate?: Pick<PeerCertificate, "subject" | "subjectaltname">) {
    super();
    this.certificate = certificate as PeerCertificate | undefined;
  }

  get writable(): boolean {
    return !this.ended;
  }

  write(message: wire.NodeMessage): boolean {
    if (this.ended) throw new Error("write after end");
    this.written.push(message);
    return true;
  }

  end(): this {
    this.ended = true;
    return this;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    this.paused = false;
    return this;
  }

  getAuthContext() {
    return this.certificate
      ? { transportSecurityType: "ssl", sslPeerCertificate: this.certificate }
      : {};
  }

  /** The guest sends a message. */
  send(message: wire.GuestMessage): void {
    this.emit("data", message);
  }
}

export interface GuestHarnessOptions {
  readonly backend: BackendOptions;
  readonly tenants: readonly TenantCredentials[];
  readonly maxFramesInFlight?: number;
  readonly maxMessageBytes?: number;
  readonly sessionLimits?: SessionAdmissionLimits;
  readonly refusals?: { perSecond: number; burst: number };
  /** The clock of the session and refusal limits and of idle sessions (ms); default performance.now. */
  readonly nowMs?: () => number;
  /** Reap sessions without a stream after this long (GuestService.reapIdle); default never. */
  readonly sessionIdleMs?: number;
  /** The service-time clock of the fair slices and call durations; default performance.now. */
  readonly cpuMs?: () => number;
  /** The node's metrics; default a registry of its own. */
  readonly metrics?: ReturnType<typeof createMetrics>;
  /**
   * The log as a standalone node has it: entries dropped once their message is served, so the
   * sequencer does not copy DMA data (SequencerOptions.logKeepsEntries). Default: the log keeps
   * every entry (tests read it).
   */
  readonly standalone?: boolean;
}

export interface GuestHarness {
  readonly service: GuestService;
  readonly backend: Backend;
  readonly sequencer: Sequencer;
  readonly idle: IdleSessions;
  /** A new stream attached to the service, as gRPC would hand it over. */
  connect(certificate?: Pick<PeerCertificate, "subject" | "subjectaltname">): FakeGuestStream;
  /** Resolves once the service has served everything it was sent (its slices, its timers). */
  settled(): Promise<void>;
}

export function guestHarness(options: GuestHarnessOptions): GuestHarness {
  const backend = new Backend(options.backend);
  const standalone = options.standalone ?? false;
  const sequencer = new Sequencer(
    backend,
    new ReplicationLog(),
    { mmio: "per-page", flushBytes: 1 << 20, logKeepsEntries: !standalone },
    () => 0,
  );
  const nowMs = options.nowMs ?? (() => performance.now());
  const idle = new IdleSessions(options.sessionIdleMs ?? 0);
  const service = new GuestService({
    idle,
    sequencer,
    auth: new TenantAuth(options.tenants),
    ...(options.sessionLimits
      ? { admission: new SessionAdmission(options.sessionLimits, nowMs) }
      : {}),
    ...(options.refusals ? { refusals: options.refusals } : {}),
    nowMs,
    ...(options.cpuMs ? { cpuMs: options.cpuMs } : {}),
    metrics:
      options.metrics ??
      createMetrics(
        idleGauges("standalone", () => backend.sessions.size),
        {
          processMetrics: false,
        },
      ),
    log: createLogger({ level: "silent", nodeId: "harness" }),
    nodeId: "harness",
    epoch: () => 1,
    maxFramesInFlight: options.maxFramesInFlight ?? 1024,
    maxMessageBytes: options.maxMessageBytes ?? 64 << 20,
    serving: () => true,
    replicatedSeq: () => undefined,
    afterApply: () => {
      sequencer.flushMmio();
      if (standalone) sequencer.log.release(sequencer.log.lastSeq, 0);
    },
  });
  return {
    service,
    backend,
    sequencer,
    idle,
    connect(certificate) {
      const stream = new FakeGuestStream(certificate);
      service.serveGrpc(stream as never);
      return stream;
    },
    async settled() {
      while (service.busy) await new Promise<void>((r) => setTimeout(r, 1));
    },
  };
}
export { testSenderOptions, testStandbyHello } from "./sender-options.js";
