// Proves lease datagrams round-trip under their key and that anything else is dropped unread:
// another key, a flipped bit anywhere, a wrong size, garbage.
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decodeLeaseDatagram,
  encodeLeaseDatagram,
  LEASE_DATAGRAM_BYTES,
} from "./lease-datagram.js";

const key = new Uint8Array(randomBytes(32));
const hb = { kind: 1, epoch: 7, counter: 42, sentMs: 123456.789 } as const;

describe("lease datagrams", () => {
  it("round-trip under their key", () => {
    expect(decodeLeaseDatagram(encodeLeaseDatagram(hb, key), key)).toEqual(hb);
  });

  it("are dropped under another key", () => {
    const other = new Uint8Array(randomBytes(32));
    expect(decodeLeaseDatagram(encodeLeaseDatagram(hb, key), other)).toBeUndefined();
  });

  it("are dropped with any bit flipped", () => {
    fc.assert(
      fc.property(fc.nat(LEASE_DATAGRAM_BYTES * 8 - 1), (bit) => {
        const d = encodeLeaseDatagram(hb, key);
        d[bit >> 3]! ^= 1 << (bit & 7);
        expect(decodeLeaseDatagram(d, key)).toBeUndefined();
      }),
    );
  });

  it("drop garbage of any size", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        expect(decodeLeaseDatagram(Buffer.from(bytes), key)).toBeUndefined();
      }),
    );
  });
});
