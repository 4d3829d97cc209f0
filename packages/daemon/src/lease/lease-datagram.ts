// The lease channel's datagrams: 32 bytes of fields and a 32-byte HMAC-SHA256 tag under the key
// the primary sends in its replication hello (so the channel is exactly as trustworthy as the
// replication stream: mutual TLS when configured). Anything that does not carry a valid tag is
// dropped unread; replays are refused by the counter (core/lease-channel.ts).
//
//   0  u32  magic "VGL1"        8  f64  epoch      24  f64  sentMs (the primary's clock)
//   4  u8   kind (1 hb, 2 ack)  16  f64  counter    32  [32] HMAC-SHA256(key, bytes 0..31)
import { createHmac, timingSafeEqual } from "node:crypto";
import type { LeaseDatagramKind, LeaseHeartbeat } from "@vgpu-ha/common/lease-channel";

export const LEASE_DATAGRAM_BYTES = 64;
const MAGIC = 0x56474c31; // "VGL1"
const BODY_BYTES = 32;

export interface LeaseDatagram extends LeaseHeartbeat {
  readonly kind: LeaseDatagramKind;
}

export function encodeLeaseDatagram(d: LeaseDatagram, key: Uint8Array): Buffer {
  const out = Buffer.alloc(LEASE_DATAGRAM_BYTES);
  out.writeUInt32BE(MAGIC, 0);
  out.writeUInt8(d.kind, 4);
  out.writeDoubleBE(d.epoch, 8);
  out.writeDoubleBE(d.counter, 16);
  out.writeDoubleBE(d.sentMs, 24);
  tag(key, out.subarray(0, BODY_BYTES)).copy(out, BODY_BYTES);
  return out;
}

/** The datagram, or undefined when it is not one of ours under `key` (wrong size, magic or tag). */
export function decodeLeaseDatagram(bytes: Buffer, key: Uint8Array): LeaseDatagram | undefined {
  if (bytes.length !== LEASE_DATAGRAM_BYTES || bytes.readUInt32BE(0) !== MAGIC) return undefined;
  const expected = tag(key, bytes.subarray(0, BODY_BYTES));
  if (!timingSafeEqual(expected, bytes.subarray(BODY_BYTES))) return undefined;
  const kind = bytes.readUInt8(4);
  if (kind !== 1 && kind !== 2) return undefined;
  return {
    kind,
    epoch: bytes.readDoubleBE(8),
    counter: bytes.readDoubleBE(16),
    sentMs: bytes.readDoubleBE(24),
  };
}

function tag(key: Uint8Array, body: Buffer): Buffer {
  return createHmac("sha256", key).update(body).digest();
}
