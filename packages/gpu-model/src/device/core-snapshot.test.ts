// Proves the device's chunk layout (core-snapshot.ts): for buffers of random zero and non-zero
// pages, some changed after a "preserve", every chunk's runs hold the pages as they were at the
// snapshot (zero pages skipped), their data are views into the chunk's one wire buffer, and that
// buffer is the room then each run's `pages` field head and data (pages-wire.ts), the layout
// whose message the pull's encoder writes in place (its test compares it with the generated
// code's bytes); the first run's data starts 8-byte aligned in that buffer.
import {
  FieldWriter,
  lenBytes,
  PAGES_HEADROOM_BYTES,
  pagesMessageBytes,
} from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DeviceCore } from "./device-core.js";
import type { ChunkResult } from "./ops.js";
import { PAGE_SIZE_BYTES } from "./vram.js";

const PAGE = PAGE_SIZE_BYTES;

const buffers = fc.array(fc.array(fc.nat(3), { minLength: 1, maxLength: 12 }), {
  minLength: 1,
  maxLength: 3,
});

describe("CoreSnapshot chunks", () => {
  it("lay the pages out in their wire form, as they were when the snapshot began", () => {
    fc.assert(
      fc.property(
        buffers,
        fc.integer({ min: 1, max: 5 }),
        fc.nat(40),
        (pages, chunkPages, changed) => {
          const core = new DeviceCore();
          const expected = new Map<string, number>(); // "bo/page" → fill byte at the snapshot
          pages.forEach((fills, b) => {
            core.execute({ k: "alloc", id: b + 1, size: fills.length * PAGE });
            const bytes = core.buffer(b + 1).bytes;
            fills.forEach((f, page) => {
              bytes.fill(f, page * PAGE, (page + 1) * PAGE);
              if (f !== 0) expected.set(`${b + 1}/${page}`, f);
            });
          });
          const list = pages.map((_, b) => ({ context: 9, bo: b + 1, id: b + 1 }));
          core.execute({ k: "snapBegin", snap: 1, buffers: list });
          // A write after the snapshot began, kept first (copy-on-write)
          const target = (changed % pages.length) + 1;
          const at = (changed % pages[target - 1]!.length) * PAGE;
          core.execute({ k: "preserve", snap: 1, id: target, start: at, end: at + PAGE });
          core.execute({ k: "write", id: target, offset: at, data: new Uint8Array(PAGE).fill(77) });
          const seen = new Map<string, number>();
          for (;;) {
            const op = { k: "snapChunk", snap: 1, maxBytes: chunkPages * PAGE } as const;
            const r = core.execute(op) as ChunkResult;
            expect(r.pages.every((p) => p.data.buffer === r.wire!.buffer)).toBe(true);
            // The first run's data is 8-byte aligned in the shared buffer (a word-wise copy).
            if (r.pages.length > 0) expect(r.pages[0]!.data.byteOffset % 8).toBe(0);
            for (const p of r.pages) {
              for (let i = 0; i < p.data.byteLength / PAGE; i++) {
                const page = p.data.subarray(i * PAGE, (i + 1) * PAGE);
                expect(page.every((x) => x === page[0])).toBe(true);
                seen.set(`${p.bo}/${p.firstPage + i}`, page[0]!);
              }
            }
            const wire = Buffer.from(r.wire!.subarray(PAGES_HEADROOM_BYTES));
            expect(wire.equals(expectedFields(r))).toBe(true);
            if (r.last) break;
          }
          expect(seen).toEqual(expected);
        },
      ),
      { numRuns: 60 },
    );
  });
});

/** The pages fields of a chunk's runs as pages-wire.ts writes them, from their data. */
function expectedFields(r: ChunkResult): Buffer {
  const runs = r.pages.map((p) => ({ ...p, dataBytes: p.data.byteLength }));
  const w = new FieldWriter(
    new Uint8Array(runs.reduce((n, x) => n + lenBytes(pagesMessageBytes(x)), 0)),
  );
  for (const run of runs) {
    w.pagesHead(run);
    w.buf.set(run.data.slice(), w.pos);
    w.pos += run.dataBytes;
  }
  return Buffer.from(w.buf);
}
