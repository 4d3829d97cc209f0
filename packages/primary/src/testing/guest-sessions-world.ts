// A guest sessions machine on a real backend and sequencer, for its tests: streams are plain
// tokens, time and the release watermark are fields the test sets, and every action is kept.
import { ErrorCode, type GuestMessage, ReplicationLog } from "@vgpu-ha/common/core";
import { Backend, type BackendOptions } from "@vgpu-ha/gpu-model";
import type { GuestAction, GuestReply, GuestSessionsOptions } from "../core/guest-session-types.js";
import { GuestSessions } from "../core/guest-sessions.js";
import { IdleSessions } from "../core/idle-sessions.js";
import { Sequencer } from "../core/sequencer.js";
import { decodeFrame, openMsg } from "./guest-wire.js";

export const BACKEND: BackendOptions = {
  device: { seed: 5, vramBytes: 16 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([
    ["a", { vramBytes: 4 << 20, bos: 64, contexts: 8 }],
    ["b", { vramBytes: 4 << 20, bos: 64, contexts: 8 }],
  ]),
  session: { replyCacheFrames: 1024, replyCacheBytes: 1 << 22 },
  maxDmaBytes: 1 << 20,
  maxStoresPerBatch: 64,
  trackMmio: true,
};

/** A stream is any token; these tests name them. */
export type S = string;

export interface World {
  readonly machine: GuestSessions<S>;
  readonly sequencer: Sequencer;
  readonly idle: IdleSessions;
  /** The release watermark replicatedSeq() answers. */
  watermark: number | undefined;
  serving: boolean;
  nowMs: number;
  /** Every action so far, in order. */
  readonly log: GuestAction<S>[];
  /** Takes the machine's actions into `log`; returns those. */
  take(): GuestAction<S>[];
}

export function world(options: Partial<GuestSessionsOptions<S>> = {}): World {
  const backend = new Backend(BACKEND);
  const sequencer = new Sequencer(
    backend,
    new ReplicationLog(),
    { mmio: "per-page", flushBytes: 1 << 20 },
    () => 0,
  );
  const idle = new IdleSessions(1000);
  let next = 1;
  const w: World = {
    sequencer,
    idle,
    watermark: undefined,
    serving: true,
    nowMs: 0,
    log: [],
    machine: new GuestSessions<S>({
      sequencer,
      idle,
      nodeId: "n1",
      epoch: () => 3,
      serving: () => w.serving,
      replicatedSeq: () => w.watermark,
      redirect: () => "peer:7000",
      maxFramesInFlight: 8,
      maxMessageBytes: 1 << 20,
      newSessionId: () => `s${next++}`,
      checkOpen: (_s, open) =>
        open.token === "good" ? undefined : { code: ErrorCode.UNAUTHENTICATED, message: "no" },
      nowMs: () => w.nowMs,
      decodeFrame,
      ...options,
    }),
    take() {
      const out = w.machine.takeActions();
      w.log.push(...out);
      return out;
    },
  };
  return w;
}

/** Serves everything the stream has queued, a slice at a time, then flushes. */
export function serveAll(w: World, s: S): void {
  while (w.machine.hasWork(s)) {
    for (;;) {
      const r = w.machine.serveOne(s);
      if (r.kind !== "frame" || !r.more) break;
    }
    w.machine.flush(s);
    w.machine.afterSlice(s);
  }
}

/** Attaches `s`, receives `messages` and serves them. */
export function send(w: World, s: S, ...messages: GuestMessage[]): GuestAction<S>[] {
  if (!w.machine.has(s)) w.machine.attach(s);
  for (const m of messages) w.machine.receive(s, m);
  serveAll(w, s);
  return w.take();
}

export const replies = (actions: readonly GuestAction<S>[], s?: S): GuestReply[] =>
  actions.flatMap((a) =>
    a.kind === "reply" && (s === undefined || a.stream === s) ? [a.reply] : [],
  );
export const errorOf = (actions: readonly GuestAction<S>[]) =>
  replies(actions).find((r): r is GuestReply & { kind: "error" } => r.kind === "error");
export const ackedFrames = (actions: readonly GuestAction<S>[], s?: S) =>
  replies(actions, s).flatMap((r) => (r.kind === "acks" ? r.results.map((x) => x.number) : []));
export const ended = (actions: readonly GuestAction<S>[], s: S) =>
  actions.some((a) => a.kind === "end" && a.stream === s);

/** Opens a session on `s`, released at once; its id. */
export function opened(w: World, s: S, tenant = "a"): string {
  const saved = w.watermark;
  w.watermark = undefined;
  const r = replies(send(w, s, openMsg(tenant)))[0];
  w.watermark = saved;
  if (r?.kind !== "opened") throw new Error(`no Opened: ${JSON.stringify(r)}`);
  return r.sessionId;
}
