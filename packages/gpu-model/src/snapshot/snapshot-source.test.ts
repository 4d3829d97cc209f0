// Proves the snapshot's byte progress: totalBytes is every buffer's size (zero pages included),
// coveredBytes grows chunk by chunk over pages sent and zero pages skipped alike, and reaches
// totalBytes with the last chunk.
import { describe, expect, it } from "vitest";
import { Backend } from "../paravirt/backend.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { SnapshotSource } from "./snapshot-source.js";

const PAGE = 4096;

describe("snapshot progress in bytes", () => {
  it("covers every buffer byte, sent or skipped, by the last chunk", () => {
    const backend = new Backend(testBackendOptions());
    const guest = new TestGuest(backend, "s1");
    const ctx = guest.createContext();
    const written = guest.alloc(ctx, 8 * PAGE);
    guest.alloc(ctx, 4 * PAGE); // all zero: skipped on the wire, still covered
    guest.write(ctx, written, 0, new Uint8Array(8 * PAGE).fill(7));
    const source = new SnapshotSource(backend, 1, 0, 2 * PAGE);
    expect(source.totalBytes).toBe(12 * PAGE);
    expect(source.coveredBytes).toBe(0);
    const covered: number[] = [];
    for (let chunk = source.next(); chunk; chunk = source.next()) {
      covered.push(source.coveredBytes);
      if (chunk.last) break;
    }
    expect(covered.at(-1)).toBe(12 * PAGE);
    // never backwards, and more than one step (2-page chunks over 8 written pages)
    expect(covered.every((c, i) => i === 0 || c >= covered[i - 1]!)).toBe(true);
    expect(new Set(covered).size).toBeGreaterThan(3);
    expect(source.sentBytes).toBe(8 * PAGE);
  });
});
