// A snapshot chunk's buffer pages written once in their wire form (issue #15): the repeated
// `pages` fields of replication.proto's SnapshotChunk (field 6, each a SnapshotPages), after
// PAGES_HEADROOM_BYTES of room. The device lays a chunk out this way as it reads it
// (core-snapshot.ts), so the pull's encoder (wire/snapshot-pages-encode.ts) only writes the
// message's few leading fields into the room, and the pages are never copied on the main
// thread. Pure protobuf arithmetic: field tags, varints, lengths.

/** Room before the pages fields: the message's leading fields take at most 41 bytes. */
export const PAGES_HEADROOM_BYTES = 64;

/** Field tags: (field number << 3) | wire type (0 varint, 2 length-delimited). */
export const PAGES_TAG = {
  pages: (6 << 3) | 2,
  context: (1 << 3) | 0,
  bo: (2 << 3) | 0,
  firstPage: (3 << 3) | 0,
  data: (4 << 3) | 2,
} as const;

export function varintBytes(n: number): number {
  let bytes = 1;
  for (let v = n; v >= 128; v = Math.floor(v / 128)) bytes++;
  return bytes;
}

/** A field's bytes, or 0 for a zero scalar (proto3 leaves it out). */
export const scalarBytes = (n: number): number => (n === 0 ? 0 : 1 + varintBytes(n));
/** A length-delimited field of `n` bytes: tag, length, bytes. */
export const lenBytes = (n: number): number => 1 + varintBytes(n) + n;

/** A run of pages as its SnapshotPages message knows it (the data by length). */
export interface PagesRun {
  readonly context: number;
  readonly bo: number;
  readonly firstPage: number;
  readonly dataBytes: number;
}

/** Bytes of one SnapshotPages message (without its own tag and length). */
export function pagesMessageBytes(r: PagesRun): number {
  const data = r.dataBytes === 0 ? 0 : lenBytes(r.dataBytes);
  return scalarBytes(r.context) + scalarBytes(r.bo) + scalarBytes(r.firstPage) + data;
}

/** Writes protobuf fields into a buffer of a size computed beforehand. */
export class FieldWriter {
  readonly buf: Uint8Array;
  pos: number;
  constructor(buf: Uint8Array, pos = 0) {
    this.buf = buf;
    this.pos = pos;
  }
  varint(n: number): void {
    let v = n;
    while (v >= 128) {
      this.buf[this.pos++] = (v % 128) | 128;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }
  scalar(tag: number, n: number): void {
    if (n === 0) return;
    this.buf[this.pos++] = tag;
    this.varint(n);
  }
  head(tag: number, length: number): void {
    this.buf[this.pos++] = tag;
    this.varint(length);
  }
  /**
   * One `pages` field up to its data: tag, length, context, bo, first page and the data's
   * tag and length. The caller writes `r.dataBytes` bytes of data next.
   */
  pagesHead(r: PagesRun): void {
    this.head(PAGES_TAG.pages, pagesMessageBytes(r));
    this.scalar(PAGES_TAG.context, r.context);
    this.scalar(PAGES_TAG.bo, r.bo);
    this.scalar(PAGES_TAG.firstPage, r.firstPage);
    if (r.dataBytes > 0) this.head(PAGES_TAG.data, r.dataBytes);
  }
}
