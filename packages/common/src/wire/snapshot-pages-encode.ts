// The snapshot pull's messages (PullSnapshot: a PrimaryMessage of kind snapshot with buffer
// pages, no metadata) encoded without protobuf-es: the same bytes as toBinary of
// encodePrimaryMessage (a test compares them). toBinary grows its writer and joins its chunks,
// several copies of every page; measured at 2.6 ms per MiB against 0.5 ms for one copy on the
// shared 2-core box. A chunk whose pages the device already laid out in their wire form
// (chunk.pagesWire, core/pages-wire.ts) costs no copy at all: the leading fields go into the
// room before the pages and the message is a view of that buffer. Otherwise the message is
// written into one buffer of its exact size, each page copied once. Chunk 0 (the metadata) is
// never pulled; it goes through the generated code on the replication stream.

import {
  FieldWriter,
  lenBytes,
  PAGES_HEADROOM_BYTES,
  pagesMessageBytes,
  scalarBytes,
  varintBytes,
} from "../core/pages-wire.js";
import type { SnapshotChunk, SnapshotPages } from "../core/snapshot.js";
import { invariant } from "../errors.js";

/** Field tags: (field number << 3) | wire type (0 varint, 2 length-delimited). */
const TAG = {
  epoch: (1 << 3) | 0,
  snapshot: (4 << 3) | 2,
  snapshotId: (1 << 3) | 0,
  atSeq: (2 << 3) | 0,
  index: (3 << 3) | 0,
  last: (4 << 3) | 0,
} as const;

const runOf = (p: SnapshotPages) => ({ ...p, dataBytes: p.data.byteLength });

/** The chunk's fields before its pages. */
function leadBytes(c: SnapshotChunk): number {
  return scalarBytes(c.snapshotId) + scalarBytes(c.atSeq) + scalarBytes(c.index) + (c.last ? 2 : 0);
}

/** Writes the message's fields up to the first page; `body`: the SnapshotChunk's length. */
function writeLead(w: FieldWriter, epoch: number, chunk: SnapshotChunk, body: number): void {
  w.scalar(TAG.epoch, epoch);
  w.head(TAG.snapshot, body);
  w.scalar(TAG.snapshotId, chunk.snapshotId);
  w.scalar(TAG.atSeq, chunk.atSeq);
  w.scalar(TAG.index, chunk.index);
  if (chunk.last) w.scalar(TAG.last, 1);
}

/** A pulled snapshot chunk (pages, no metadata) as the bytes of its PrimaryMessage. */
export function encodePulledChunk(epoch: number, chunk: SnapshotChunk): Uint8Array {
  invariant(chunk.meta === undefined, "a pulled chunk carries no metadata");
  if (chunk.pagesWire !== undefined) return inPlace(epoch, chunk, chunk.pagesWire);
  const pages = chunk.pages.map((p) => pagesMessageBytes(runOf(p)));
  let body = leadBytes(chunk);
  for (const p of pages) body += lenBytes(p);
  const w = new FieldWriter(new Uint8Array(scalarBytes(epoch) + lenBytes(body)));
  writeLead(w, epoch, chunk, body);
  for (const p of chunk.pages) {
    w.pagesHead(runOf(p));
    w.buf.set(p.data, w.pos);
    w.pos += p.data.byteLength;
  }
  invariant(w.pos === w.buf.byteLength, "pulled chunk size miscounted");
  return w.buf;
}

/**
 * The message around pages already in their wire form: its leading fields written into the
 * room before them, the message a view from there to the end (no page copied). Writing them
 * again (the same chunk on a reopened pull) writes the same bytes.
 */
function inPlace(epoch: number, chunk: SnapshotChunk, wire: Uint8Array): Uint8Array {
  const pagesBytes = wire.byteLength - PAGES_HEADROOM_BYTES;
  const body = leadBytes(chunk) + pagesBytes;
  const lead = scalarBytes(epoch) + 1 + varintBytes(body) + leadBytes(chunk);
  invariant(lead <= PAGES_HEADROOM_BYTES, "pulled chunk's leading fields exceed their room");
  const start = PAGES_HEADROOM_BYTES - lead;
  const w = new FieldWriter(wire, start);
  writeLead(w, epoch, chunk, body);
  invariant(w.pos === PAGES_HEADROOM_BYTES, "pulled chunk's leading fields miscounted");
  return wire.subarray(start);
}
