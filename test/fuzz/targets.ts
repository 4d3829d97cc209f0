// The fuzz targets: fast-check properties over hostile bytes and hostile call sequences, run
// by test/fuzz/fuzz.test.ts (a fixed seed, a few hundred runs, in `npm test`) and by
// `npm run fuzz -- --runs N [--seed S] [--target NAME]` (test/fuzz/run.ts) for long runs. Each
// property fails on a throw that escapes, and says what else must hold.
import { EventEmitter } from "node:events";
import { isDeepStrictEqual } from "node:util";
import { create, fromBinary } from "@bufbuild/protobuf";
import {
  type Call,
  createLogger,
  decodeFrame,
  decodePrimaryMessage,
  decodePrimaryStreamBytes,
  decodeStandbyMessage,
  type Entry,
  EntryUnpacker,
  ErrorCode,
  MalformedError,
  type PrimaryMessage,
  packEntries,
  primaryDecoder,
  REPLICATION_PROTOCOL_VERSION,
  ReplicationLog,
  unpackEntries,
  wire,
} from "@vgpu-ha/common";
import {
  FRAME,
  type Frame,
  FrameError,
  FrameReader,
  HELLO_BYTES_MAX,
  PlacedChunkReader,
  parseRefused,
} from "@vgpu-ha/daemon";
import { Backend, type BackendOptions, computeDigest } from "@vgpu-ha/gpu-model";
import { backendOptionsFor, generateWorkload, type Workload } from "@vgpu-ha/gpu-model/testing";
import { Sender, Sequencer } from "@vgpu-ha/primary";
import { guestHarness } from "@vgpu-ha/primary/testing";
import { applyEntry, Receiver, StandbyLink } from "@vgpu-ha/standby";
import fc from "fast-check";
import {
  ENTRY_SEEDS,
  FRAME_SEEDS,
  GUEST_SEEDS,
  guestFrames,
  META_CHUNK_SEEDS,
  PACKED_SEEDS,
  PACKED_STREAM_FIRST,
  PACKED_STREAM_SEEDS,
  PAGES_SEEDS,
  PLACED_SEEDS,
  STANDBY_SEEDS,
  STRANGER_SEEDS,
} from "./corpus.js";
import { hostileBytes } from "./mutate.js";

/** A property of any arguments (fc.assert takes each target's own). */
type Prop = fc.IRawProperty<never>;

export interface FuzzTarget {
  readonly name: string;
  /** Runs in `npm test` (the long runs take --runs). */
  readonly defaultRuns: number;
  readonly property: () => Prop;
}

class FuzzFailure extends Error {}
const check = (ok: boolean, what: string) => {
  if (!ok) throw new FuzzFailure(what);
};

/** Bytes as gRPC would deserialize them; undefined when gRPC itself refuses (stream closed). */
function parse<T>(decode: () => T): T | undefined {
  try {
    return decode();
  } catch {
    return undefined;
  }
}

const KNOWN_CODES = new Set(Object.values(ErrorCode).filter((v) => typeof v === "number"));

// ---- decoders ----

const guestDecoder: FuzzTarget = {
  name: "guest-decoder",
  defaultRuns: 1000,
  property: () =>
    fc.property(hostileBytes([...GUEST_SEEDS, ...FRAME_SEEDS]), (bytes) => {
      const m = parse(() => fromBinary(wire.GuestMessageSchema, bytes));
      if (m?.kind.case !== "frames") return;
      for (const f of m.kind.value.frames) {
        const frame = decodeFrame(f); // never throws: a Frame or MALFORMED
        check(
          frame instanceof MalformedError || typeof frame.number === "number",
          "decodeFrame gave neither a frame nor MalformedError",
        );
      }
    }) as unknown as Prop,
};

const replicationDecoders: FuzzTarget = {
  name: "replication-decoders",
  defaultRuns: 1000,
  property: () =>
    fc.property(
      hostileBytes([...STRANGER_SEEDS, ...ENTRY_SEEDS, ...META_CHUNK_SEEDS]),
      hostileBytes(STANDBY_SEEDS),
      (primaryBytes, standbyBytes) => {
        const p = parse(() => fromBinary(wire.PrimaryMessageSchema, primaryBytes));
        if (p) {
          const d = decodePrimaryMessage(p);
          check(d instanceof MalformedError || typeof d.kind === "string", "primary message");
        }
        // The replication stream's own deserializer (chunk 0 read by its own codec): what
        // fromBinary refuses it refuses, and what it gives decodes as fromBinary's does.
        const fast = parse(() => decodePrimaryStreamBytes(primaryBytes));
        check((fast === undefined) === (p === undefined), "stream deserializer refuses alike");
        if (p && fast) {
          const d = decodePrimaryMessage(p);
          const f = primaryDecoder()(fast);
          const same =
            d instanceof MalformedError
              ? f instanceof MalformedError && f.message === d.message
              : isDeepStrictEqual(f, d);
          check(same, "stream deserializer decodes as the generated code");
        }
        const s = parse(() => fromBinary(wire.StandbyMessageSchema, standbyBytes));
        if (s) {
          const d = decodeStandbyMessage(s);
          check(d instanceof MalformedError || typeof d.kind === "string", "standby message");
        }
      },
    ) as unknown as Prop,
};

const packedEntriesDecoder: FuzzTarget = {
  name: "packed-entries-decoder",
  defaultRuns: 1000,
  property: () =>
    fc.property(hostileBytes(PACKED_SEEDS), (bytes) => {
      const entries = unpackEntries(bytes); // never throws: entries or MALFORMED
      if (entries instanceof MalformedError) return;
      check(Array.isArray(entries), "unpackEntries gave neither entries nor MalformedError");
      // What it accepted packs again to entries equal to it (nothing half-decoded).
      const again = unpackEntries(packEntries(entries));
      check(
        !(again instanceof MalformedError) && again.length === entries.length,
        "accepted entries do not pack again",
      );
    }) as unknown as Prop,
};

/**
 * A stream's decoder (its name table filled by a valid first batch) fed hostile later
 * batches: entries or MALFORMED, never a throw; whatever it accepts names only strings the
 * stream introduced or the batch carried, and packs again.
 */
const packedStreamDecoder: FuzzTarget = {
  name: "packed-stream-decoder",
  defaultRuns: 1000,
  property: () =>
    fc.property(
      fc.array(hostileBytes(PACKED_STREAM_SEEDS), { minLength: 1, maxLength: 4 }),
      (batches) => {
        const unpacker = new EntryUnpacker();
        const first = unpacker.unpack(PACKED_STREAM_FIRST);
        check(!(first instanceof MalformedError), "the stream's first batch did not decode");
        for (const bytes of batches) {
          const entries = unpacker.unpack(bytes);
          if (entries instanceof MalformedError) return; // the stream ends there
          check(entries.length <= bytes.length, "more entries than bytes");
          const again = unpackEntries(packEntries(entries));
          check(
            !(again instanceof MalformedError) && again.length === entries.length,
            "accepted entries do not pack again",
          );
        }
      },
    ) as unknown as Prop,
};

// ---- the guest service ----

const GUEST_BACKEND: BackendOptions = {
  device: { seed: 5, vramBytes: 8 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([["a", { vramBytes: 4 << 20, bos: 16, contexts: 4 }]]),
  session: { replyCacheFrames: 64, replyCacheBytes: 1 << 16 },
  maxDmaBytes: 1 << 16,
  maxStoresPerBatch: 64,
  trackMmio: false,
};

/** A node holding tenant a's context 1 with buffers 1 and 2 (data in 1), and its session. */
async function guestNode() {
  const h = guestHarness({
    backend: GUEST_BACKEND,
    tenants: [{ name: "a", token: "token-of-a-0001" }],
    maxFramesInFlight: 64,
    refusals: { perSecond: 1e9, burst: 1e9 },
  });
  const owner = h.connect();
  owner.send(
    create(wire.GuestMessageSchema, {
      kind: { case: "open", value: { tenant: "a", token: "token-of-a-0001" } },
    }),
  );
  const setup: Call[] = [
    { op: "contextCreate" },
    { op: "boAlloc", context: 1, sizeBytes: 4096 },
    { op: "boAlloc", context: 1, sizeBytes: 4096 },
    { op: "dmaWrite", context: 1, bo: 1, offset: 0, data: Uint8Array.of(9, 8, 7, 6) },
  ];
  owner.send(guestFrames(1, setup));
  await h.settled();
  return { h, owner };
}

const strangerOnGuestPort: FuzzTarget = {
  name: "guest-stranger",
  defaultRuns: 300,
  property: () =>
    fc.asyncProperty(
      fc.array(hostileBytes(GUEST_SEEDS), { minLength: 1, maxLength: 6 }),
      async (all) => {
        const { h } = await guestNode();
        const before = computeDigest(h.backend);
        const stranger = h.connect();
        for (const bytes of all) {
          const m = parse(() => fromBinary(wire.GuestMessageSchema, bytes));
          if (m) stranger.send(m);
        }
        await h.settled();
        // Nothing a stranger sends changes any state, sessions included.
        check(JSON.stringify(computeDigest(h.backend)) === JSON.stringify(before), "state changed");
        // It hears at most one thing back — a session error — and then the stream is over.
        const answers = stranger.written.map((w) => w.kind.case);
        check(
          answers.length === 0 ||
            (answers.length === 1 && answers[0] === "error") ||
            answers[0] === "closed",
          `a stranger was answered ${answers.join(",")}`,
        );
        for (const w of stranger.written) {
          if (w.kind.case === "error") check(KNOWN_CODES.has(w.kind.value.code), "unknown code");
        }
      },
    ) as unknown as Prop,
};

const framesOnGuestPort: FuzzTarget = {
  name: "guest-session-frames",
  defaultRuns: 300,
  property: () =>
    fc.asyncProperty(
      fc.array(hostileBytes(FRAME_SEEDS), { minLength: 1, maxLength: 6 }),
      async (all) => {
        const { h, owner } = await guestNode();
        const before = computeDigest(h.backend).gpu;
        owner.written.length = 0;
        for (const bytes of all) {
          const m = parse(() => fromBinary(wire.GuestMessageSchema, bytes));
          if (m) owner.send(m);
        }
        await h.settled();
        const results = owner.written.flatMap((w) =>
          w.kind.case === "acks" ? w.kind.value.results.map((r) => r.result?.code) : [],
        );
        for (const code of results) check(code !== undefined && KNOWN_CODES.has(code), "bad code");
        // The GPU state changes only through a frame that was answered OK, or the session's
        // own Close (which destroys its contexts).
        if (computeDigest(h.backend).gpu !== before) {
          const closed = h.backend.sessions.size === 0;
          check(results.includes(ErrorCode.OK) || closed, "state changed without an OK frame");
        }
      },
    ) as unknown as Prop,
};

// ---- the standby's end of the replication stream ----

/** A gRPC stream as StandbyLink gets it, fed by the test. */
export class FakeCall extends EventEmitter {
  readonly written: wire.StandbyMessage[] = [];
  ended = false;
  getPeer(): string {
    return "127.0.0.1:40000";
  }
  write(m: wire.StandbyMessage): boolean {
    this.written.push(m);
    return true;
  }
  end(): void {
    this.ended = true;
    this.emit("end");
  }
  cancel(): void {
    this.ended = true;
  }
}

const STANDBY_OPTIONS: BackendOptions = {
  ...GUEST_BACKEND,
  tenants: new Map([["a", { vramBytes: 4 << 20, bos: 16, contexts: 4 }]]),
};

/** A standby at epoch 5 holding a replica at seq 4 (a session of a with a context and data). */
export function standbyFixture(
  peerName = "primary",
  apply?: (backend: Backend, entry: Entry) => ReturnType<typeof applyEntry>,
) {
  const backend = new Backend(STANDBY_OPTIONS);
  const session = backend.openSession("s1", "a");
  if ("code" in session) throw new Error(session.message);
  const calls: Call[] = [
    { op: "contextCreate" },
    { op: "boAlloc", context: 1, sizeBytes: 4096 },
    { op: "dmaWrite", context: 1, bo: 1, offset: 0, data: Uint8Array.of(1, 2, 3) },
  ];
  for (const [i, call] of calls.entries()) {
    backend.applyFrame(session, { number: i + 1, body: { kind: "call", call } });
  }
  const receiver = new Receiver(
    {
      clusterId: "fuzz",
      nodeId: "standby",
      backendOptions: STANDBY_OPTIONS,
      ...(apply ? { apply } : {}),
    },
    5,
  );
  receiver.adopt(backend, 4);
  const link = new StandbyLink({
    receiver,
    logger: createLogger({ level: "silent", nodeId: "standby" }),
    onStep: () => undefined,
    now: () => 0,
    identity: { clusterId: "fuzz", nodeId: "standby", peerName },
  });
  const view = () => ({
    seq: receiver.appliedSeq,
    epoch: receiver.epoch,
    state: receiver.state,
    granted: receiver.granted,
    digest: receiver.backend ? computeDigest(receiver.backend).state : "",
  });
  return { receiver, link, view };
}

const strangerOnReplicationPort: FuzzTarget = {
  name: "replication-stranger",
  defaultRuns: 500,
  property: () =>
    fc.property(fc.array(hostileBytes(STRANGER_SEEDS), { minLength: 1, maxLength: 5 }), (all) => {
      // As under tls, where the primary must be peer.name: without tls, any node that knows
      // the cluster id and a current epoch is taken (docs/security.md), and a mutation of a
      // seed can be exactly that.
      const { link, view } = standbyFixture("node-p");
      const before = JSON.stringify(view());
      const call = new FakeCall();
      link.accept(call as never);
      for (const bytes of all) {
        const m = parse(() => fromBinary(wire.PrimaryMessageSchema, bytes));
        if (m) call.emit("data", m);
      }
      // No stranger's message is taken: state, epoch, grant and replica unchanged.
      check(JSON.stringify(view()) === before, `state changed: ${JSON.stringify(view())}`);
      check(!link.connected, "a stranger became the live primary");
    }) as unknown as Prop,
};

const entriesFromPrimary: FuzzTarget = {
  name: "replication-entries",
  defaultRuns: 500,
  property: () =>
    fc.property(fc.array(hostileBytes(ENTRY_SEEDS), { minLength: 1, maxLength: 5 }), (all) => {
      // Every entry applied must be the replica's next: none twice, none skipped.
      const outOfOrder: string[] = [];
      const fixture = standbyFixture(undefined, (backend, entry) => {
        if (entry.seq !== fixture.receiver.appliedSeq + 1) {
          outOfOrder.push(`${entry.seq} after ${fixture.receiver.appliedSeq}`);
        }
        return applyEntry(backend, entry);
      });
      const { receiver, link } = fixture;
      const call = new FakeCall();
      link.accept(call as never);
      call.emit("data", helloOf("fuzz", "primary", 5));
      check(link.connected, "the primary's hello was refused");
      for (const bytes of all) {
        const m = parse(() => fromBinary(wire.PrimaryMessageSchema, bytes));
        if (m) call.emit("data", m);
      }
      // Garbage from the primary itself: applied in order, a gap (resend asked), divergence
      // (resync asked), or a snapshot begun or failed — states the standby reports; never a
      // throw, never an entry out of order.
      check(
        ["replica", "diverged", "snapshot", "empty"].includes(receiver.state),
        `state ${receiver.state}`,
      );
      check(outOfOrder.length === 0, `applied out of order: ${outOfOrder.join(", ")}`);
    }) as unknown as Prop,
};

/** A primary's hello as it arrives on the wire. */
export function helloOf(clusterId: string, nodeId: string, epoch: number): wire.PrimaryMessage {
  return create(wire.PrimaryMessageSchema, {
    epoch: BigInt(epoch),
    kind: {
      case: "hello",
      value: {
        clusterId,
        nodeId,
        firstRetainedSeq: 1n,
        lastSeq: 4n,
        protocolVersion: REPLICATION_PROTOCOL_VERSION,
      },
    },
  });
}

// ---- the primary's end: what a standby answers ----

const answersToPrimary: FuzzTarget = {
  name: "replication-standby-answers",
  defaultRuns: 500,
  property: () =>
    fc.property(fc.array(hostileBytes(STANDBY_SEEDS), { minLength: 1, maxLength: 8 }), (all) => {
      const log = new ReplicationLog();
      for (let i = 0; i < 4; i++)
        log.append({ kind: "sessionOpen", sessionId: `s${i}`, tenant: "a" }, 0);
      const sender = new Sender(
        {
          clusterId: "fuzz",
          nodeId: "primary",
          peerName: "standby",
          maxBatchEntries: 16,
          maxBatchBytes: 1 << 16,
          maxInflightEntries: 64,
          maxInflightBytes: 1 << 20,
          snapshotWindowChunks: 2,
          heartbeatMs: 10,
          retransmitMs: 100,
          retainBytes: 1 << 20,
        },
        log,
        () => ({
          snapshotId: 1,
          atSeq: log.lastSeq,
          next: () => undefined,
          release: () => undefined,
        }),
        3,
      );
      sender.connected(0);
      let now = 0;
      for (const bytes of all) {
        now += 7;
        sender.poll(now);
        const w = parse(() => fromBinary(wire.StandbyMessageSchema, bytes));
        const m = w && decodeStandbyMessage(w);
        if (m && !(m instanceof MalformedError)) sender.step(m, now);
        sender.takeEvents();
        // Whatever a standby says, the primary never believes more applied than it logged.
        check(sender.appliedSeq <= log.lastSeq, `applied ${sender.appliedSeq} > ${log.lastSeq}`);
        check(log.lastSeq === 4, "the log changed");
      }
    }) as unknown as Prop,
};

// ---- two tenants and a hostile one, through the primary's sequencer and a replica ----

const HOSTILE = "t9";

/** Calls of a hostile session naming another tenant's live context (and its buffers). */
function hostileCalls(ctx: number): Call[] {
  return [
    { op: "fence", context: ctx },
    { op: "boAlloc", context: ctx, sizeBytes: 4096 },
    { op: "dmaRead", context: ctx, bo: 1, offset: 0, length: 16 },
    { op: "dmaWrite", context: ctx, bo: 1, offset: 0, data: Uint8Array.of(0xee) },
    { op: "boMap", context: ctx, bo: 1 },
    { op: "boFree", context: ctx, bo: 1 },
    { op: "boCopy", context: ctx, srcBo: 1, srcOffset: 0, dstBo: 2, dstOffset: 0, length: 4 },
    {
      op: "kernelLaunch",
      context: ctx,
      kernel: "fill",
      args: [
        { kind: "buffer", bo: 1 },
        { kind: "u32", value: 1 },
        { kind: "u32", value: 7 },
      ],
    },
    { op: "contextDestroy", context: ctx },
  ];
}

/**
 * Runs `workload` on a primary (sequencer and log) with a hostile session of a third tenant
 * interleaved; applies the log to a replica with another device seed. Returns what a check
 * needs.
 */
function runWithHostile(workload: Workload, hostileEvery: number, pick: number) {
  const options = backendOptionsFor(workload, 11);
  const tenants = new Map(options.tenants);
  tenants.set(HOSTILE, { vramBytes: 64 << 10, bos: 2, contexts: 1 });
  const primary = new Backend({ ...options, tenants });
  const log = new ReplicationLog();
  const sequencer = new Sequencer(primary, log, { mmio: "per-page", flushBytes: 1 << 20 }, () => 0);
  const records = new Map(
    workload.sessions.map((s) => {
      const r = sequencer.openSession(s.id, s.tenant);
      if ("code" in r) throw new Error(r.message);
      return [s.id, r] as const;
    }),
  );
  const hostile = sequencer.openSession("hostile", HOSTILE);
  if ("code" in hostile) throw new Error(hostile.message);
  const codes: ErrorCode[] = [];
  const hostileAnswers: { ctx: number; code: ErrorCode; message: string }[] = [];
  const overQuota: string[] = [];
  workload.steps.forEach((step, i) => {
    codes.push(sequencer.applyFrame(records.get(step.session)!, step.frame).outcome.result.code);
    if (i % hostileEvery === 0) {
      const live = [...primary.contexts.values()].filter((c) => c.tenant !== HOSTILE);
      if (live.length > 0) {
        const ctx = live[(pick + i) % live.length]!.handle;
        const calls = hostileCalls(ctx);
        const call = calls[(pick + i) % calls.length]!;
        const r = sequencer.applyFrame(hostile, {
          number: hostile.lastFrame + 1,
          body: { kind: "call", call },
        }).outcome.result;
        hostileAnswers.push({ ctx, code: r.code, message: r.message });
      }
    }
    for (const [t, q] of tenants) {
      const u = primary.tenantUsage(t);
      if (u.vramBytes > q.vramBytes || u.bos > q.bos || u.contexts > (q.contexts ?? Infinity)) {
        overQuota.push(`${t} at step ${i}`);
      }
    }
  });
  sequencer.flushMmio();
  const replica = new Backend({ ...options, tenants, device: { ...options.device, seed: 0xbeef } });
  const divergences: string[] = [];
  for (const entry of log.read(1, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)) {
    const r = applyEntry(replica, entry);
    if (!r.ok) divergences.push(`seq ${entry.seq}: ${r.divergence}`);
  }
  return { primary, replica, codes, hostileAnswers, overQuota, divergences };
}

const hostileTenantSequences: FuzzTarget = {
  name: "two-tenants-and-a-hostile-one",
  defaultRuns: 100,
  property: () =>
    fc.property(
      fc.integer({ min: 0, max: 0x7fffffff }),
      fc.integer({ min: 20, max: 160 }),
      fc.integer({ min: 1, max: 4 }),
      fc.nat(100),
      (seed, frames, hostileEvery, pick) => {
        const workload = generateWorkload(seed, { frames, sessions: 3, tenants: 2 });
        const run = runWithHostile(workload, hostileEvery, pick);
        // Isolation: every workload frame answered as the generator's model says, as if the
        // hostile session were not there; the GPU state is what the workload alone makes.
        for (const [i, code] of run.codes.entries()) {
          const expected = workload.steps[i]!.expect.code;
          check(code === expected, `step ${i}: ${code}, expected ${expected}`);
        }
        const alone = new Backend(backendOptionsFor(workload, 11));
        for (const s of workload.sessions) alone.openSession(s.id, s.tenant);
        for (const s of workload.steps) alone.applyFrame(alone.sessions.get(s.session)!, s.frame);
        check(
          computeDigest(run.primary).gpu === computeDigest(alone).gpu,
          "the hostile session changed the GPU state",
        );
        // Another tenant's live context answers exactly as an unknown one.
        for (const a of run.hostileAnswers) {
          check(
            a.code === ErrorCode.UNKNOWN_CONTEXT && a.message === `no context ${a.ctx}`,
            `naming context ${a.ctx}: ${a.code} ${a.message}`,
          );
        }
        check(run.overQuota.length === 0, `over quota: ${run.overQuota.join(", ")}`);
        // The replica applied the same log to an equal state.
        check(run.divergences.length === 0, run.divergences.join("; "));
        check(
          JSON.stringify(computeDigest(run.replica)) === JSON.stringify(computeDigest(run.primary)),
          "the replica differs",
        );
      },
    ) as unknown as Prop,
};

// ---- the pages socket's frames (daemon/src/roles/snapshot-pull-frames.ts) ----

const PAGES_CHUNK_BYTES_MAX = 4096;
const PAGES_ACCEPTS = {
  standby: {
    [FRAME.accepted]: 0,
    [FRAME.refused]: 1028,
    [FRAME.chunk]: PAGES_CHUNK_BYTES_MAX,
    [FRAME.end]: 0,
  },
  primary: { [FRAME.hello]: HELLO_BYTES_MAX },
} as const;

/** Frames read from `bytes` delivered in pieces cut at `cuts`: the frames, or the error. */
function readPages(
  accepts: Partial<Record<number, number>>,
  bytes: Uint8Array,
  cuts: readonly number[],
): Frame[] | FrameError {
  const reader = new FrameReader({ accepts });
  const frames: Frame[] = [];
  let at = 0;
  for (const cut of [
    ...cuts.map((c) => c % (bytes.byteLength + 1)).sort((a, b) => a - b),
    bytes.byteLength,
  ]) {
    if (cut < at) continue;
    const r = reader.push(bytes.subarray(at, cut));
    if (r instanceof FrameError) return r;
    frames.push(...r);
    at = cut;
  }
  return frames;
}

const pagesFrames: FuzzTarget = {
  name: "pages-frames",
  defaultRuns: 1000,
  property: () =>
    fc.property(
      hostileBytes(PAGES_SEEDS),
      fc.array(fc.nat(), { maxLength: 6 }),
      fc.constantFrom("standby" as const, "primary" as const),
      (bytes, cuts, end) => {
        const accepts: Partial<Record<number, number>> = PAGES_ACCEPTS[end];
        const whole = readPages(accepts, bytes, []);
        const split = readPages(accepts, bytes, cuts);
        // However the bytes arrive, the same frames (or the same refusal).
        check(
          whole instanceof FrameError === split instanceof FrameError,
          "split changed the outcome",
        );
        if (whole instanceof FrameError || split instanceof FrameError) return;
        check(whole.length === split.length, "split changed the frames");
        whole.forEach((f, i) => {
          const max = accepts[f.kind];
          check(max !== undefined && f.payload.byteLength <= max, "a frame over its bound");
          check(Buffer.from(f.payload).equals(split[i]!.payload), "split changed a payload");
          if (f.kind === FRAME.refused && f.payload.byteLength >= 4) parseRefused(f.payload);
          if (f.kind === FRAME.chunk) {
            const m = parse(() => fromBinary(wire.PrimaryMessageSchema, f.payload));
            if (m) check(typeof decodePrimaryMessage(m) === "object", "chunk decode");
          }
          if (f.kind === FRAME.hello) {
            const m = parse(() => fromBinary(wire.StandbyMessageSchema, f.payload));
            if (m) check(typeof decodeStandbyMessage(m) === "object", "hello decode");
          }
        });
      },
    ) as unknown as Prop,
};

/**
 * A pulled chunk's payload read in place (daemon/src/roles/snapshot-pull-place.ts) from hostile
 * bytes in hostile pieces: it never throws; whatever it makes, protobuf decodes the same bytes
 * to the same message (it takes no layout protobuf would read otherwise); every run it read in
 * place holds exactly the payload's bytes for that run.
 */
const pagesPlaced: FuzzTarget = {
  name: "pages-placed",
  defaultRuns: 1000,
  property: () =>
    fc.property(
      hostileBytes(PLACED_SEEDS),
      fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 5 }),
      fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }),
      (bytes, steps, places) => {
        if (bytes.byteLength === 0) return;
        let asked = 0;
        const reader = new PlacedChunkReader(new Uint8Array(bytes.byteLength), (_c, run) =>
          places[asked++ % places.length] && run.bytes <= 1 << 20
            ? { into: new Uint8Array(run.bytes), live: () => true }
            : undefined,
        );
        let at = 0;
        let k = 0;
        let made: unknown;
        while (at < bytes.byteLength && made === undefined) {
          const into = reader.target();
          check(into.byteLength > 0, "an empty read target");
          const n = Math.min(into.byteLength, steps[k++ % steps.length]!, bytes.byteLength - at);
          into.set(bytes.subarray(at, at + n));
          at += n;
          made = reader.filled(n);
        }
        if (made === undefined || made instanceof Error) return;
        check(at === bytes.byteLength, "a message before the payload's end");
        const m = made as Extract<PrimaryMessage, { kind: "snapshot" }>;
        const w = parse(() => fromBinary(wire.PrimaryMessageSchema, bytes));
        check(w !== undefined, "read in place what protobuf cannot decode");
        const d = decodePrimaryMessage(w!);
        check(!(d instanceof Error) && d.kind === "snapshot", "not protobuf's snapshot");
        const want = (d as typeof m).chunk;
        check(m.epoch === (d as typeof m).epoch, "epoch differs");
        for (const f of ["snapshotId", "atSeq", "index", "last"] as const) {
          check(m.chunk[f] === want[f], `${f} differs`);
        }
        check(want.meta === undefined, "metadata read as none");
        check(m.chunk.pages.length === want.pages.length, "runs differ");
        m.chunk.pages.forEach((p, i) => {
          const q = want.pages[i]!;
          check(
            p.context === q.context && p.bo === q.bo && p.firstPage === q.firstPage,
            "run head",
          );
          check(Buffer.from(p.data).equals(Buffer.from(q.data)), "run bytes differ");
        });
      },
    ) as unknown as Prop,
};

export const FUZZ_TARGETS: readonly FuzzTarget[] = [
  guestDecoder,
  replicationDecoders,
  packedEntriesDecoder,
  packedStreamDecoder,
  strangerOnGuestPort,
  framesOnGuestPort,
  strangerOnReplicationPort,
  entriesFromPrimary,
  answersToPrimary,
  hostileTenantSequences,
  pagesFrames,
  pagesPlaced,
];
