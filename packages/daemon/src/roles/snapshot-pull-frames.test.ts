// Proves the pages socket's frame reader (snapshot-pull-frames.ts): frames come back whole and
// equal however the bytes are split (a byte at a time, or all at once), each payload in a
// buffer of its own exact size that the reader fills in place; a first 8 bytes other than the
// magic are "foreign"; a kind this end does not take, or a frame over its bound, breaks the
// reader before any payload is allocated.
import { describe, expect, it } from "vitest";
import {
  FRAME,
  FrameError,
  FrameReader,
  frameOf,
  PAGES_MAGIC,
  parseRefused,
  refusedPayload,
} from "./snapshot-pull-frames.js";

const accepts = { [FRAME.accepted]: 0, [FRAME.chunk]: 1000, [FRAME.refused]: 1028, [FRAME.end]: 0 };

function stream(...frames: Uint8Array[]): Uint8Array {
  return Buffer.concat([PAGES_MAGIC, ...frames]);
}

const payload = (n: number, seed: number) =>
  Uint8Array.from({ length: n }, (_, i) => (i * seed) % 251);

describe("FrameReader", () => {
  const bytes = stream(
    frameOf(FRAME.accepted),
    frameOf(FRAME.chunk, payload(1000, 3)),
    frameOf(FRAME.chunk, payload(1, 5)),
    frameOf(FRAME.refused, refusedPayload(37, "snapshot stale")),
    frameOf(FRAME.end),
  );
  const kinds = [FRAME.accepted, FRAME.chunk, FRAME.chunk, FRAME.refused, FRAME.end];

  it("reads frames whole from any split of the bytes", () => {
    for (const step of [1, 2, 5, 7, 1000, bytes.byteLength]) {
      const reader = new FrameReader({ accepts });
      const got = [];
      for (let at = 0; at < bytes.byteLength; at += step) {
        const r = reader.push(bytes.subarray(at, at + step));
        if (r instanceof Error) throw r;
        got.push(...r);
      }
      expect(got.map((f) => f.kind)).toEqual(kinds);
      expect(got[1]!.payload).toEqual(payload(1000, 3));
      expect(got[1]!.payload.buffer.byteLength).toBe(1000); // its own, exact
      expect(got[2]!.payload).toEqual(payload(1, 5));
      expect(parseRefused(got[3]!.payload)).toEqual({ code: 37, message: "snapshot stale" });
    }
  });

  it("is filled in place: target() is where the bytes go, never empty", () => {
    const reader = new FrameReader({ accepts, alloc: (n) => new Uint8Array(n) });
    const frames = [];
    let at = 0;
    while (at < bytes.byteLength) {
      const into = reader.target();
      expect(into.byteLength).toBeGreaterThan(0);
      const n = Math.min(into.byteLength, 333, bytes.byteLength - at);
      into.set(bytes.subarray(at, at + n));
      at += n;
      const r = reader.filled(n);
      if (r instanceof Error) throw r;
      if (r) frames.push(r);
    }
    expect(frames.map((f) => f.kind)).toEqual(kinds);
  });

  it("tells a peer that does not speak it (HTTP/2's preface) apart", () => {
    const reader = new FrameReader({ accepts });
    expect(reader.greeted).toBe(false);
    const r = reader.push(Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    expect(r).toBeInstanceOf(FrameError);
    expect((r as FrameError).foreign).toBe(true);
    expect(reader.push(Uint8Array.of(1))).toBeInstanceOf(FrameError); // broken for good
  });

  it("refuses an unexpected kind and an oversized frame before allocating it", () => {
    let allocated = 0;
    const alloc = (n: number) => {
      allocated += n;
      return new Uint8Array(n);
    };
    const hello = new FrameReader({ accepts, alloc }).push(
      stream(frameOf(FRAME.hello, payload(3, 1))),
    );
    expect(hello).toBeInstanceOf(FrameError);
    expect((hello as FrameError).foreign).toBe(false);
    const huge = new FrameReader({ accepts, alloc }).push(
      stream(Uint8Array.of(FRAME.chunk, 0xff, 0xff, 0xff, 0xff)),
    );
    expect((huge as FrameError).message).toMatch(/at most 1000/);
    const nonEmptyEnd = new FrameReader({ accepts, alloc }).push(
      stream(frameOf(FRAME.end, payload(1, 1))),
    );
    expect(nonEmptyEnd).toBeInstanceOf(FrameError);
    expect(allocated).toBe(0);
  });
});
