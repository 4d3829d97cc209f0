// The entry codec per entry, in process, side by side with another build in the same run:
// BENCH_BEFORE=DIR (a built worktree of the previous commit) loads @vgpu-ha/common from DIR and
// the two builds alternate round by round. Without it, only this build. A few seconds.
//   small-256   batches of 256 fence-call entries from 8 sessions (a busy async primary)
//   small-8     batches of 8 such entries (a sync primary: a few frames in flight)
//   dma-64k     batches of one 64 KiB dmaWrite
// and the primary's log: append + release of small calls with retainBytes 64 MiB, entries
// released (applied) every 1024 as a standby's acks do, per entry (this build packs each
// released entry into its retained slabs; the build before kept the objects).
// For each: the packed encoding of one batch alone (packEntries / unpackEntries: a name table
// per batch), the whole primary message as a stream sends it (primaryEncoder + toBinary,
// fromBinary + primaryDecoder, in the steady state: names already sent on the stream; a build
// without per-stream names uses encodePrimaryMessage / decodePrimaryMessage), and the protobuf
// form (encodeEntryBatchUnpacked + toBinary: the codec before the packed one) as the reference.
// Figures are CPU time of this process (process.cpuUsage), medians over rounds.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Metric, publish } from "./report.js";
import { median } from "./timing.js";

const ROUNDS = 5;
const SESSIONS = 8;
/** Entries each case encodes per round (so each case takes about as long). */
const ENTRIES_PER_ROUND = 100_000;
const DMA_BATCHES_PER_ROUND = 2_000;

type Common = typeof import("@vgpu-ha/common");
type Entry = Parameters<Common["packEntries"]>[0][number];

async function loadCommon(root: string | undefined): Promise<Common> {
  if (root === undefined) return import("@vgpu-ha/common");
  const at = pathToFileURL(path.resolve(root, "packages/common/dist/index.js")).href;
  return (await import(at)) as Common;
}

function cpuSeconds(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

function fenceEntries(c: Common, n: number): Entry[] {
  return Array.from({ length: n }, (_, i) => ({
    seq: 1_000_000 + i,
    body: {
      kind: "call" as const,
      sessionId: `0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b8${i % SESSIONS}`,
      frame: 5000 + i,
      call: { op: "fence" as const, context: 1 },
      handles: c.EMPTY_DELTA,
      result: { code: 0, outputDigest: new Uint8Array(9).fill(3) },
    },
  }));
}

function dmaEntries(c: Common): Entry[] {
  const data = new Uint8Array(64 * 1024).map((_, i) => i * 7);
  return [
    {
      seq: 1_000_000,
      body: {
        kind: "call",
        sessionId: "0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b80",
        frame: 5000,
        call: { op: "dmaWrite", context: 1, bo: 2, offset: 0, data },
        handles: c.EMPTY_DELTA,
        result: { code: 0, outputDigest: new Uint8Array(0) },
      },
    },
  ];
}

interface CaseResult {
  packUs: number;
  unpackUs: number;
  messageEncodeUs: number;
  messageDecodeUs: number;
  protobufEncodeUs: number;
  protobufDecodeUs: number;
  packedBytes: number;
  messageBytes: number;
  protobufBytes: number;
}

/** One round of a case: µs per entry for each codec step, and bytes per entry. */
function caseRound(c: Common, entries: Entry[], batches: number): () => CaseResult {
  const { wire } = c;
  const message = { kind: "entries" as const, epoch: 3, entries };
  const packed = c.packEntries(entries);
  const encoder = (c as Partial<Common>).primaryEncoder?.() ?? c.encodePrimaryMessage;
  const decoder = (c as Partial<Common>).primaryDecoder?.() ?? c.decodePrimaryMessage;
  // The stream's first batch introduces its names; the next is the steady state.
  decoder(
    fromBinary(wire.PrimaryMessageSchema, toBinary(wire.PrimaryMessageSchema, encoder(message))),
  );
  const messageBytes = toBinary(wire.PrimaryMessageSchema, encoder(message));
  const unpacked = () =>
    create(wire.PrimaryMessageSchema, {
      epoch: 3n,
      kind: { case: "entries", value: c.encodeEntryBatchUnpacked(entries) },
    });
  const protobufBytes = toBinary(wire.PrimaryMessageSchema, unpacked());
  const n = batches * entries.length;
  const perEntry = (run: () => void) => {
    const seconds = cpuSeconds(() => {
      for (let i = 0; i < batches; i++) run();
    });
    return (seconds / n) * 1e6;
  };
  return () => ({
    packUs: perEntry(() => c.packEntries(entries)),
    unpackUs: perEntry(() => c.unpackEntries(packed)),
    messageEncodeUs: perEntry(() => toBinary(wire.PrimaryMessageSchema, encoder(message))),
    messageDecodeUs: perEntry(() => decoder(fromBinary(wire.PrimaryMessageSchema, messageBytes))),
    protobufEncodeUs: perEntry(() => toBinary(wire.PrimaryMessageSchema, unpacked())),
    protobufDecodeUs: perEntry(() =>
      c.decodePrimaryMessage(fromBinary(wire.PrimaryMessageSchema, protobufBytes)),
    ),
    packedBytes: packed.byteLength / entries.length,
    messageBytes: messageBytes.byteLength / entries.length,
    protobufBytes: protobufBytes.byteLength / entries.length,
  });
}

const LOG_ENTRIES_PER_ROUND = 200_000;
const RELEASE_EVERY = 1024;

/** µs CPU per entry appended to and released from a log that retains 64 MiB. */
function logRound(c: Common): () => number {
  const bodies = fenceEntries(c, 256).map((e) => e.body);
  const log = new c.ReplicationLog();
  return () => {
    const seconds = cpuSeconds(() => {
      for (let i = 0; i < LOG_ENTRIES_PER_ROUND; i++) {
        log.append(bodies[i % bodies.length]!, i);
        if (i % RELEASE_EVERY === 0) log.release(log.lastSeq, 64 * 2 ** 20);
      }
    });
    return (seconds / LOG_ENTRIES_PER_ROUND) * 1e6;
  };
}

const CASES = [
  { name: "small_256", entries: (c: Common) => fenceEntries(c, 256) },
  { name: "small_8", entries: (c: Common) => fenceEntries(c, 8) },
  { name: "dma_64k", entries: dmaEntries },
] as const;

const FIELDS = [
  ["packUs", "pack_us", "µs CPU per entry (packEntries)"],
  ["unpackUs", "unpack_us", "µs CPU per entry (unpackEntries)"],
  ["messageEncodeUs", "message_encode_us", "µs CPU per entry (stream encoder + toBinary)"],
  ["messageDecodeUs", "message_decode_us", "µs CPU per entry (fromBinary + stream decoder)"],
  ["protobufEncodeUs", "protobuf_encode_us", "µs CPU per entry (protobuf form, reference)"],
  ["protobufDecodeUs", "protobuf_decode_us", "µs CPU per entry (protobuf form, reference)"],
] as const;

export async function runEntryCodec(): Promise<void> {
  const root = process.env.BENCH_BEFORE;
  const builds = [{ prefix: "", common: await loadCommon(undefined) }];
  if (root) builds.push({ prefix: "before_", common: await loadCommon(root) });
  const rounds = builds.map((b) =>
    CASES.map((k) => {
      const entries = k.entries(b.common);
      const batches =
        k.name === "dma_64k" ? DMA_BATCHES_PER_ROUND : ENTRIES_PER_ROUND / entries.length;
      return caseRound(b.common, entries, batches);
    }),
  );
  const logs = builds.map((b) => logRound(b.common));
  const logSamples = builds.map(() => [] as number[]);
  const samples = builds.map(() => CASES.map(() => [] as CaseResult[]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = builds.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) {
      for (let k = 0; k < CASES.length; k++) samples[i]![k]!.push(rounds[i]![k]!());
      logSamples[i]!.push(logs[i]!());
    }
  }
  const metrics: Metric[] = [];
  const values: Record<string, number> = {};
  builds.forEach((b, i) => {
    const logUs = median(logSamples[i]!);
    values[`${b.prefix}log_append_release_us`] = logUs;
    metrics.push({
      name: `${b.prefix}log_append_release_us`,
      value: logUs,
      unit: "µs CPU per small entry (append + release, retainBytes 64 MiB)",
    });
    CASES.forEach((k, j) => {
      const s = samples[i]![j]!;
      for (const [field, name, unit] of FIELDS) {
        const value = median(s.map((r) => r[field]));
        values[`${b.prefix}${k.name}_${name}`] = value;
        metrics.push({ name: `${b.prefix}${k.name}_${name}`, value, unit });
      }
      const bytes = [
        ["packed_bytes", s[0]!.packedBytes],
        ["message_bytes", s[0]!.messageBytes],
        ["protobuf_bytes", s[0]!.protobufBytes],
      ] as const;
      for (const [name, value] of bytes) {
        metrics.push({ name: `${b.prefix}${k.name}_${name}`, value, unit: "B per entry" });
      }
    });
  });
  const ratios: Record<string, number> = {};
  if (builds.length > 1) {
    ratios.log_append_release_us_over_before =
      values.log_append_release_us! / values.before_log_append_release_us!;
    for (const k of CASES) {
      for (const name of ["pack_us", "unpack_us", "message_encode_us", "message_decode_us"]) {
        ratios[`${k.name}_${name}_over_before`] =
          values[`${k.name}_${name}`]! / values[`before_${k.name}_${name}`]!;
      }
    }
  }
  publish({
    name: "entry-codec",
    notes: [
      `in process; ${ROUNDS} rounds${root ? `, builds alternating (BENCH_BEFORE=${root})` : ""}; medians; CPU time of this process`,
      `small_256: batches of 256 fence-call entries from ${SESSIONS} sessions; small_8: batches of 8; dma_64k: one 64 KiB dmaWrite per batch`,
    ],
    metrics,
    ratios,
  });
}
