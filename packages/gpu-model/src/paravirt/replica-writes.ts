// What a standby applies without executing calls (backend.ts, standby side): MMIO page batches
// a primary shipped, and the frames it applied (store frames) recorded in the session table.
// Both check everything first: a failure changes nothing.
import { ErrorCode, type FrameRecord, NO_OUTPUT, type PageWrite } from "@vgpu-ha/common/core";
import type { Device } from "../device/device.js";
import { type Failure, fail, inRange } from "../device/failure.js";
import type { OpPageWrite } from "../device/ops.js";
import { PAGE_SIZE_BYTES } from "../device/vram.js";
import type { GuestBo, GuestContext } from "./guest-context.js";
import type { SessionLimits, SessionRecord } from "./session-table.js";

/**
 * Writes MMIO page batches shipped by a primary: every extent into the named buffer's page.
 * All or nothing: an unknown buffer or an extent outside its page changes nothing.
 */
export function applyPageWrites(
  device: Device,
  contexts: ReadonlyMap<number, GuestContext>,
  pages: readonly PageWrite[],
): Failure | null {
  const targets: GuestBo[] = [];
  for (const page of pages) {
    const gbo = contexts.get(page.context)?.bos.get(page.bo);
    if (gbo === undefined) {
      return fail(ErrorCode.UNKNOWN_BO, `page batch names ${page.context}/${page.bo}`);
    }
    const pageStart = page.pageIndex * PAGE_SIZE_BYTES;
    for (const e of page.extents) {
      const inPage = inRange(e.offsetInPage, e.data.byteLength, PAGE_SIZE_BYTES);
      if (!inPage || !inRange(pageStart + e.offsetInPage, e.data.byteLength, gbo.bo.byteLength)) {
        return fail(
          ErrorCode.OUT_OF_BOUNDS,
          `page batch extent outside ${page.context}/${page.bo}`,
        );
      }
    }
    targets.push(gbo);
  }
  const writes: OpPageWrite[] = [];
  for (const [i, page] of pages.entries()) {
    const id = targets[i]!.bo.id;
    const pageStart = page.pageIndex * PAGE_SIZE_BYTES;
    for (const e of page.extents) writes.push({ id, at: pageStart + e.offsetInPage, data: e.data });
  }
  device.writePages(writes);
  return null;
}

/** Records a frame the primary applied without executing it here (store frames). */
export function recordFrame(
  sessions: ReadonlyMap<string, SessionRecord>,
  record: FrameRecord,
  limits: SessionLimits,
): Failure | null {
  const session = sessions.get(record.sessionId);
  if (session === undefined) return fail(ErrorCode.UNKNOWN_SESSION, "frame of unknown session");
  if (record.frame !== session.lastFrame + 1) {
    return fail(
      ErrorCode.FRAME_OUT_OF_ORDER,
      `frame ${record.frame} recorded after ${session.lastFrame}`,
    );
  }
  session.lastFrame = record.frame;
  session.remember(
    record.frame,
    { code: record.code, message: record.message, output: NO_OUTPUT },
    limits,
  );
  return null;
}
