// Proves that the GPU snapshot's chunk planner walks pages exactly as the model's CoreSnapshot:
// random buffers (zero and non-zero pages), random chunk sizes; the same runs, covered bytes,
// passed buffers and last flag, chunk after chunk.
import { type ChunkResult, DeviceCore, PAGE_SIZE_BYTES } from "@vgpu-ha/gpu-model";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkPlanner } from "./chunk.js";

describe("ChunkPlanner", () => {
  it("plans the model's chunks", () => {
    const buffer = fc.array(fc.boolean(), { minLength: 0, maxLength: 9 });
    fc.assert(
      fc.property(
        fc.array(buffer, { minLength: 1, maxLength: 5 }),
        fc.array(fc.integer({ min: 1, max: 5 * PAGE_SIZE_BYTES }), { minLength: 1, maxLength: 8 }),
        (buffers, sizes) => {
          const core = new DeviceCore();
          buffers.forEach((pages, i) => {
            core.execute({ k: "alloc", id: i + 1, size: pages.length * PAGE_SIZE_BYTES });
            pages.forEach((nonZero, page) => {
              if (nonZero) {
                core.execute({ k: "xor", id: i + 1, offset: page * PAGE_SIZE_BYTES + 7, mask: 1 });
              }
            });
          });
          core.execute({
            k: "snapBegin",
            snap: 1,
            buffers: buffers.map((_, i) => ({ context: 1, bo: 10 + i, id: i + 1 })),
          });
          const planned = buffers.map((pages) => ({
            pages: pages.length,
            nextPage: 0,
            flags: pages,
          }));
          const planner = new ChunkPlanner(planned, (b, page) => !b.flags[page]);
          for (let round = 0; round < 40; round++) {
            const maxBytes = sizes[round % sizes.length]!;
            const want = core.execute({ k: "snapChunk", snap: 1, maxBytes }) as ChunkResult;
            const got = planner.chunk(maxBytes);
            expect(got.runs.map((r) => [10 + r.buffer, r.first, r.end])).toEqual(
              want.pages.map((p) => [
                p.bo,
                p.firstPage,
                p.firstPage + p.data.byteLength / PAGE_SIZE_BYTES,
              ]),
            );
            expect([got.coveredBytes, got.passedBuffers, got.last]).toEqual([
              want.coveredBytes,
              want.passedBuffers,
              want.last,
            ]);
            if (want.last) break;
          }
        },
      ),
    );
  });
});
