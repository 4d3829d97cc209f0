// Proves the guest's own Frames encoder (guest-frames-encode.ts) writes exactly the bytes of
// the generated code (toBinary of the GuestMessage) for messages of random frames — dma_writes
// with data below and above the splice size, empty data, zero and largest handles, offsets and
// frame numbers, beside fences, dma_reads and store batches — and that they decode back to the
// same frames.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Frame, FrameSchema, GuestMessageSchema } from "../gen/vgpu/v1/guest_pb.js";
import { encodeGuestFrames } from "./guest-frames-encode.js";

const u32 = fc.oneof(fc.constant(0), fc.nat(300), fc.nat({ max: 0xffffffff }));
const u64 = fc.oneof(
  fc.constant(0n),
  fc.bigInt({ min: 1n, max: 300n }),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
);
const data = fc.oneof(
  fc.constant(new Uint8Array(0)),
  fc.uint8Array({ maxLength: 64 }),
  fc.uint8Array({ minLength: 1023, maxLength: 1025 }),
  fc.constant(new Uint8Array(65536).fill(0xa5)),
);

const dmaWrite = fc
  .record({ context: u32, bo: u32, offset: u64, data })
  .map((value) => ({ case: "call" as const, value: { op: { case: "dmaWrite" as const, value } } }));
const fence = u32.map((context) => ({
  case: "call" as const,
  value: { op: { case: "fence" as const, value: { context } } },
}));
const dmaRead = fc.record({ context: u32, bo: u32, offset: u64, length: u64 }).map((value) => ({
  case: "call" as const,
  value: { op: { case: "dmaRead" as const, value } },
}));
const stores = fc
  .record({
    context: u32,
    bo: u32,
    offsets: fc.array(u32, { maxLength: 4 }),
    widths: fc.uint8Array({ maxLength: 4 }),
    data: fc.uint8Array({ maxLength: 32 }),
  })
  .map((value) => ({ case: "stores" as const, value }));

const frame = fc
  .record({ number: u64, body: fc.oneof(dmaWrite, dmaWrite, fence, dmaRead, stores) })
  .map((f) => create(FrameSchema, f as never) as Frame);

const ofFrames = (frames: Frame[]) =>
  create(GuestMessageSchema, { kind: { case: "frames", value: { frames } } });

describe("encodeGuestFrames", () => {
  it("writes the generated code's bytes, which decode to the same frames", () => {
    fc.assert(
      fc.property(fc.array(frame, { maxLength: 6 }), (frames) => {
        const ours = Buffer.from(encodeGuestFrames(frames));
        const theirs = toBinary(GuestMessageSchema, ofFrames(frames));
        // (Buffer.equals: a deep equality of large byte arrays is slow in vitest)
        expect(ours.equals(theirs)).toBe(true);
        const back = fromBinary(GuestMessageSchema, ours);
        expect(back.kind.case).toBe("frames");
        const decoded = back.kind.case === "frames" ? back.kind.value.frames : [];
        expect(decoded.length).toBe(frames.length);
        decoded.forEach((f, i) => {
          const again = Buffer.from(toBinary(FrameSchema, f));
          expect(again.equals(toBinary(FrameSchema, frames[i]!))).toBe(true);
        });
      }),
      { numRuns: 300 },
    );
  });

  it("copies a large dma_write's data into the message once, not keeping the caller's buffer", () => {
    const bytes = new Uint8Array(65536).fill(7);
    const f = create(FrameSchema, {
      number: 9n,
      body: { case: "call", value: { op: { case: "dmaWrite", value: { bo: 1, data: bytes } } } },
    });
    const out = encodeGuestFrames([f]);
    expect(out.buffer).not.toBe(bytes.buffer);
    expect(out.byteLength).toBe(toBinary(GuestMessageSchema, ofFrames([f])).byteLength);
  });
});
