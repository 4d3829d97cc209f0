// A pulled chunk's frame read with its pages in place (issue #15): the standby's socket reads
// each run's bytes straight into the replica's buffer (a PagesPlacer's placement), not into a
// receive buffer that the device thread then copies from. On a fresh replica that copy is where
// each 4 KiB page is first touched, a fault each on the device thread; a socket read straight
// into fresh memory measured 2-3 times as fast as a read plus a copy (docs/benchmarks.md).
//
// The payload is the PrimaryMessage the primary lays out (wire/snapshot-pages-encode.ts):
// epoch, the snapshot field, the chunk's leading fields, then each `pages` field (context, bo,
// first page, data). This reader takes exactly that layout: fields in that order, zero scalars
// left out, no metadata (chunk 0 is never pulled); anything else is malformed. Heads are read
// into the frame's receive buffer at their place, at most HEAD_READ_BYTES at a time (a head is
// at most 36 bytes: the bytes read past one are the next run's first, copied to where they
// go). A run with no placement is read into the receive buffer at its place, as before.
// Pure: the socket asks target() where its next bytes go and calls filled(n).
import {
  PAGES_TAG,
  type PagesPlacement,
  type PagesPlacer,
  type PrimaryMessage,
  type SnapshotPages,
} from "@vgpu-ha/common/core";

/** Bytes read at a time while a head is read: a head, and perhaps a few bytes after it. */
export const HEAD_READ_BYTES = 64;

/** Field tags: (field number << 3) | wire type (0 varint, 2 length-delimited). */
const TAG = {
  epoch: (1 << 3) | 0,
  snapshot: (4 << 3) | 2,
  chunkScalars: [(1 << 3) | 0, (2 << 3) | 0, (3 << 3) | 0, (4 << 3) | 0],
  meta: (5 << 3) | 2,
} as const;

const UINT32_MAX = 0xffff_ffff;

interface Lead {
  readonly epoch: number;
  readonly snapshotId: number;
  readonly atSeq: number;
  readonly index: number;
  readonly last: boolean;
  /** Where the first `pages` field starts (or the payload's end). */
  readonly end: number;
}

interface RunHead {
  readonly context: number;
  readonly bo: number;
  readonly firstPage: number;
  /** Where the run's data starts in the payload, and its length. */
  readonly dataAt: number;
  readonly dataBytes: number;
}

interface Run extends RunHead {
  readonly placement: PagesPlacement | undefined;
}

/** Parsed up to here, or: more bytes needed (undefined), or malformed (an Error). */
type Parsed<T> = T | undefined | Error;

/** Where bytes go once the reader has failed (the socket may read once more). */
const SCRATCH = new Uint8Array(64);

export class PlacedChunkReader {
  private readonly buf: Uint8Array;
  private readonly place: PagesPlacer;
  /** Payload bytes read so far, wherever they went. */
  private filledTo = 0;
  /** Where the next head starts. */
  private parsedTo = 0;
  private lead: Lead | undefined;
  private run: Run | undefined;
  private readonly pages: SnapshotPages[] = [];
  private failure: string | undefined;

  /** `buf`: the frame's receive buffer, the payload's size. */
  constructor(buf: Uint8Array, place: PagesPlacer) {
    this.buf = buf;
    this.place = place;
  }

  /** Where the next bytes go: never empty, never past the payload or the run being read. */
  target(): Uint8Array {
    if (this.failure !== undefined) return SCRATCH;
    const r = this.run;
    if (r?.placement !== undefined) {
      // Checked before every read: the chunk may have stopped being the one expected.
      if (!r.placement.live()) {
        this.failure = "the replica no longer expects this chunk";
        return SCRATCH;
      }
      return r.placement.into.subarray(this.filledTo - r.dataAt);
    }
    if (r !== undefined) return this.buf.subarray(this.filledTo, r.dataAt + r.dataBytes);
    const end = Math.min(this.buf.byteLength, this.filledTo + HEAD_READ_BYTES);
    return this.buf.subarray(this.filledTo, end);
  }

  /** `n` bytes were written at target(): the message once the payload is whole, or why not. */
  filled(n: number): PrimaryMessage | Error | undefined {
    if (this.failure !== undefined) return new Error(this.failure);
    this.filledTo += n;
    const r = this.advance();
    if (r instanceof Error) this.failure = r.message;
    return r;
  }

  /** Whether every run with data was read in place (the receive buffer holds only heads). */
  get allPlaced(): boolean {
    return this.pages.every((p) => p.placed === true || p.data.byteLength === 0);
  }

  private advance(): PrimaryMessage | Error | undefined {
    for (;;) {
      const r = this.run;
      if (r !== undefined) {
        const end = r.dataAt + r.dataBytes;
        if (this.filledTo < end) return undefined;
        this.pages.push(
          r.placement !== undefined
            ? { ...pageFields(r), data: r.placement.into, placed: true }
            : { ...pageFields(r), data: this.buf.subarray(r.dataAt, end) },
        );
        this.parsedTo = end;
        this.run = undefined;
        continue;
      }
      if (this.lead === undefined) {
        const lead = parseLead(this.buf, this.filledTo);
        if (lead === undefined || lead instanceof Error) return lead;
        this.lead = lead;
        this.parsedTo = lead.end;
        continue;
      }
      if (this.parsedTo === this.buf.byteLength) return this.message(this.lead);
      const head = parseRunHead(this.buf, this.parsedTo, this.filledTo);
      if (head === undefined || head instanceof Error) return head;
      this.run = { ...head, placement: this.placementOf(this.lead, head) };
    }
  }

  /** The run's placement, with the bytes already read past its head copied into it. */
  private placementOf(lead: Lead, head: RunHead): PagesPlacement | undefined {
    if (head.dataBytes === 0) return undefined;
    const p = this.place(
      { snapshotId: lead.snapshotId, index: lead.index },
      { context: head.context, bo: head.bo, firstPage: head.firstPage, bytes: head.dataBytes },
    );
    if (p === undefined || p.into.byteLength !== head.dataBytes || !p.live()) return undefined;
    const have = Math.min(this.filledTo, head.dataAt + head.dataBytes) - head.dataAt;
    if (have > 0) p.into.set(this.buf.subarray(head.dataAt, head.dataAt + have));
    return p;
  }

  private message(lead: Lead): PrimaryMessage {
    return {
      kind: "snapshot",
      epoch: lead.epoch,
      chunk: {
        snapshotId: lead.snapshotId,
        atSeq: lead.atSeq,
        index: lead.index,
        last: lead.last,
        meta: undefined,
        pages: this.pages,
      },
    };
  }
}

const pageFields = (r: RunHead) => ({ context: r.context, bo: r.bo, firstPage: r.firstPage });

/**
 * A varint at `at`, read from buf[0, end): [value, where it ends]. More bytes are needed when it
 * runs past `end`; malformed when longer than 10 bytes or not a safe integer.
 */
function varint(buf: Uint8Array, at: number, end: number): Parsed<[number, number]> {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (at + i >= end) return undefined;
    const b = buf[at + i]!;
    value += (b & 0x7f) * scale;
    if (b < 0x80) {
      return Number.isSafeInteger(value) ? [value, at + i + 1] : new Error("varint too large");
    }
    scale *= 128;
  }
  return new Error("varint too long");
}

/** Reads optional varint fields with these tags, in order, from `at` until `stop`. */
function scalars(
  buf: Uint8Array,
  at: number,
  end: number,
  stop: number,
  tags: readonly number[],
): Parsed<{ values: number[]; end: number }> {
  const values = tags.map(() => 0);
  let p = at;
  for (let k = 0; k < tags.length; k++) {
    if (p === stop) break;
    if (p >= end) return undefined;
    if (buf[p] !== tags[k]) continue;
    const v = varint(buf, p + 1, Math.min(end, stop));
    if (v === undefined && end >= stop) return new Error("field runs past its message");
    if (v === undefined || v instanceof Error) return v;
    values[k] = v[0];
    p = v[1];
  }
  return { values, end: p };
}

/** The message's fields up to its first `pages` field; the payload is buf's whole length. */
function parseLead(buf: Uint8Array, end: number): Parsed<Lead> {
  const total = buf.byteLength;
  let p = 0;
  let epoch = 0;
  if (end === 0) return undefined;
  if (buf[0] === TAG.epoch) {
    const v = varint(buf, 1, end);
    if (v === undefined || v instanceof Error) return v;
    [epoch, p] = v;
  }
  if (p >= end) return p >= total ? new Error("not a snapshot chunk") : undefined;
  if (buf[p] !== TAG.snapshot) return new Error("not a snapshot chunk");
  const body = varint(buf, p + 1, end);
  if (body === undefined || body instanceof Error) return body;
  if (body[1] + body[0] !== total) return new Error("snapshot chunk length is not its frame's");
  const fields = scalars(buf, body[1], end, total, TAG.chunkScalars);
  if (fields === undefined || fields instanceof Error) return fields;
  const at = fields.end;
  if (at < total) {
    if (at >= end) return undefined;
    if (buf[at] === TAG.meta) return new Error("a pulled chunk with metadata");
    if (buf[at] !== PAGES_TAG.pages) return new Error(`unexpected field tag ${buf[at]} in a chunk`);
  }
  const [snapshotId, atSeq, index, last] = fields.values as [number, number, number, number];
  if (index > UINT32_MAX) return new Error("chunk index too large");
  return { epoch, snapshotId, atSeq, index, last: last !== 0, end: at };
}

/** One `pages` field from `at` up to its data. */
function parseRunHead(buf: Uint8Array, at: number, end: number): Parsed<RunHead> {
  const total = buf.byteLength;
  if (at >= end) return undefined;
  if (buf[at] !== PAGES_TAG.pages) return new Error(`unexpected field tag ${buf[at]} in a chunk`);
  const len = varint(buf, at + 1, end);
  if (len === undefined || len instanceof Error) return len;
  const [bytes, start] = len;
  const stop = start + bytes;
  if (stop > total) return new Error("pages field runs past the chunk");
  const tags = [PAGES_TAG.context, PAGES_TAG.bo, PAGES_TAG.firstPage];
  const fields = scalars(buf, start, end, stop, tags);
  if (fields === undefined || fields instanceof Error) return fields;
  const [context, bo, firstPage] = fields.values as [number, number, number];
  if (context > UINT32_MAX || bo > UINT32_MAX || firstPage > UINT32_MAX) {
    return new Error("pages field value too large");
  }
  let p = fields.end;
  let dataAt = p;
  let dataBytes = 0;
  if (p < stop) {
    if (p >= end) return undefined;
    if (buf[p] !== PAGES_TAG.data) return new Error(`unexpected field tag ${buf[p]} in pages`);
    const d = varint(buf, p + 1, Math.min(end, stop));
    if (d === undefined && end >= stop) return new Error("pages data length runs past its field");
    if (d === undefined || d instanceof Error) return d;
    [dataBytes, dataAt] = d;
    p = dataAt + dataBytes;
  }
  if (p !== stop) return new Error("pages field length does not match its fields");
  return { context, bo, firstPage, dataAt, dataBytes };
}
