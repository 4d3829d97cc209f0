// A guest's Frames message encoded into one buffer of its exact size, with each dma_write's
// data copied once: the same bytes as protobuf-es's toBinary (a test compares them). toBinary
// writes a nested message into a writer of its own and joins it into its parent's, so a 64 KiB
// dma_write, five messages deep (GuestMessage > Frames > Frame > Call > DmaWrite), was copied
// about six times, each into a new buffer: 90–150 µs of the guest's CPU per 64 KiB on the
// shared 2-core box, against 15–30 µs for one allocation and copy (bench/hot-paths-guest.ts,
// `guest_dma_encode_64k_cpu_us`). Other frames go through the generated code as they are.
import { toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Frame, FrameSchema } from "../gen/vgpu/v1/guest_pb.js";
import type { DmaWrite } from "../gen/vgpu/v1/types_pb.js";

/** Data at least this long is copied straight into the message; shorter, toBinary is as good. */
const SPLICE_MIN_BYTES = 1024;

/** Field numbers on the path to DmaWrite.data (proto/vgpu/v1/guest.proto, types.proto). */
const FIELD = {
  guestFrames: 2, // GuestMessage.frames
  framesFrame: 1, // Frames.frames
  frameNumber: 1, // Frame.number
  frameCall: 2, // Frame.call
  callDmaWrite: 7, // Call.dma_write
  dmaContext: 1,
  dmaBo: 2,
  dmaOffset: 3,
  dmaData: 4,
} as const;

/** A frame's bytes, in pieces: small heads written by a BinaryWriter, and the data itself. */
interface Encoded {
  readonly pieces: Uint8Array[];
  readonly bytes: number;
}

const lengthHead = (field: number, length: number): Uint8Array =>
  new BinaryWriter().tag(field, WireType.LengthDelimited).uint32(length).finish();

/** A dma_write frame whose data goes in as it is; the heads before it as toBinary writes them. */
function dmaWriteFrame(frame: Frame, dma: DmaWrite): Encoded {
  const n = dma.data.byteLength;
  const w = new BinaryWriter();
  if (dma.context !== 0) w.tag(FIELD.dmaContext, WireType.Varint).uint32(dma.context);
  if (dma.bo !== 0) w.tag(FIELD.dmaBo, WireType.Varint).uint32(dma.bo);
  if (dma.offset !== 0n) w.tag(FIELD.dmaOffset, WireType.Varint).uint64(dma.offset);
  const dmaHead = w.tag(FIELD.dmaData, WireType.LengthDelimited).uint32(n).finish();
  const dmaBytes = dmaHead.byteLength + n;
  const callHead = lengthHead(FIELD.callDmaWrite, dmaBytes);
  const callBytes = callHead.byteLength + dmaBytes;
  const f = new BinaryWriter();
  if (frame.number !== 0n) f.tag(FIELD.frameNumber, WireType.Varint).uint64(frame.number);
  const frameHead = f.tag(FIELD.frameCall, WireType.LengthDelimited).uint32(callBytes).finish();
  return {
    pieces: [frameHead, callHead, dmaHead, dma.data],
    bytes: frameHead.byteLength + callBytes,
  };
}

function encodeFrame(frame: Frame): Encoded {
  const b = frame.body;
  if (
    b.case === "call" &&
    b.value.op.case === "dmaWrite" &&
    b.value.op.value.data.byteLength >= SPLICE_MIN_BYTES
  ) {
    return dmaWriteFrame(frame, b.value.op.value);
  }
  const bytes = toBinary(FrameSchema, frame);
  return { pieces: [bytes], bytes: bytes.byteLength };
}

/**
 * The bytes of GuestMessage { frames: { frames } }, exactly as toBinary writes them. The
 * result may be given to the guest stream's serializer as it is (grpc/service-adapter.ts).
 */
export function encodeGuestFrames(frames: readonly Frame[]): Uint8Array {
  const pieces: Uint8Array[] = [];
  let body = 0;
  for (const frame of frames) {
    const e = encodeFrame(frame);
    const head = lengthHead(FIELD.framesFrame, e.bytes);
    pieces.push(head, ...e.pieces);
    body += head.byteLength + e.bytes;
  }
  const top = lengthHead(FIELD.guestFrames, body);
  const out = new Uint8Array(top.byteLength + body);
  out.set(top, 0);
  let at = top.byteLength;
  for (const p of pieces) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
