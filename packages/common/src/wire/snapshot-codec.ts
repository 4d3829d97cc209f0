// Converts snapshot chunks (SnapshotChunk in replication.proto) to and from the domain types.
// Decoders throw MalformedError (decode-guards.ts) and copy every bytes field out of the
// receive buffer, but for buffer pages (see decodePages).
import { create } from "@bufbuild/protobuf";
import type { CallResult } from "../calls.js";
import type {
  SnapshotBo,
  SnapshotChunk,
  SnapshotContext,
  SnapshotMeta,
  SnapshotPages,
  SnapshotSession,
} from "../core/snapshot.js";
import {
  SnapshotBoSchema,
  SnapshotChunkSchema,
  SnapshotContextSchema,
  SnapshotMetaSchema,
  SnapshotPagesSchema,
  SnapshotReplySchema,
  SnapshotSessionSchema,
  type SnapshotBo as WireSnapshotBo,
  type SnapshotChunk as WireSnapshotChunk,
  type SnapshotContext as WireSnapshotContext,
  type SnapshotMeta as WireSnapshotMeta,
  type SnapshotPages as WireSnapshotPages,
  type SnapshotReply as WireSnapshotReply,
  type SnapshotSession as WireSnapshotSession,
} from "../gen/vgpu/v1/replication_pb.js";
import { decodeResult, encodeResult, toSafe } from "./call-codec.js";
import { present } from "./decode-guards.js";

// ---- encode ----

export function encodeChunk(c: SnapshotChunk): WireSnapshotChunk {
  return create(SnapshotChunkSchema, {
    snapshotId: BigInt(c.snapshotId),
    atSeq: BigInt(c.atSeq),
    index: c.index,
    last: c.last,
    meta: c.meta === undefined ? undefined : encodeMeta(c.meta),
    pages: c.pages.map(encodePages),
  });
}

function encodeMeta(meta: SnapshotMeta): WireSnapshotMeta {
  return create(SnapshotMetaSchema, {
    nextContextHandle: meta.nextContextHandle,
    contexts: meta.contexts.map(encodeContext),
    sessions: meta.sessions.map(encodeSession),
  });
}

function encodeContext(c: SnapshotContext): WireSnapshotContext {
  return create(SnapshotContextSchema, {
    handle: c.handle,
    tenant: c.tenant,
    sessionId: c.sessionId,
    nextBoHandle: c.nextBoHandle,
    fenceValue: BigInt(c.fenceValue),
    bos: c.bos.map((b) =>
      create(SnapshotBoSchema, {
        handle: b.handle,
        sizeBytes: BigInt(b.sizeBytes),
        mapped: b.mapped,
      }),
    ),
  });
}

function encodeSession(s: SnapshotSession): WireSnapshotSession {
  return create(SnapshotSessionSchema, {
    sessionId: s.sessionId,
    tenant: s.tenant,
    lastFrame: BigInt(s.lastFrame),
    replies: s.replies.map((r) =>
      create(SnapshotReplySchema, { frame: BigInt(r.frame), result: encodeResult(r.result) }),
    ),
  });
}

function encodePages(p: SnapshotPages): WireSnapshotPages {
  return create(SnapshotPagesSchema, {
    context: p.context,
    bo: p.bo,
    firstPage: p.firstPage,
    data: p.data,
  });
}

// ---- decode ----

/** `meta` is only on chunk 0; absent stays undefined. Throws MalformedError. */
export function decodeChunk(w: WireSnapshotChunk): SnapshotChunk {
  return {
    snapshotId: toSafe(w.snapshotId, "snapshot id"),
    atSeq: toSafe(w.atSeq, "snapshot seq"),
    index: w.index,
    last: w.last,
    meta: w.meta === undefined ? undefined : decodeMeta(w.meta),
    pages: w.pages.map((p) => decodePages(p)),
  };
}

function decodeMeta(w: WireSnapshotMeta): SnapshotMeta {
  return {
    nextContextHandle: w.nextContextHandle,
    contexts: w.contexts.map((c) => decodeContext(c)),
    sessions: w.sessions.map((s) => decodeSession(s)),
  };
}

function decodeContext(w: WireSnapshotContext): SnapshotContext {
  const bo = (b: WireSnapshotBo): SnapshotBo => ({
    handle: b.handle,
    sizeBytes: toSafe(b.sizeBytes, "buffer size"),
    mapped: b.mapped,
  });
  return {
    handle: w.handle,
    tenant: w.tenant,
    sessionId: w.sessionId,
    nextBoHandle: w.nextBoHandle,
    fenceValue: toSafe(w.fenceValue, "fence value"),
    bos: w.bos.map(bo),
  };
}

function decodeSession(w: WireSnapshotSession): SnapshotSession {
  return {
    sessionId: w.sessionId,
    tenant: w.tenant,
    lastFrame: toSafe(w.lastFrame, "session last frame"),
    replies: w.replies.map((r) => decodeReply(r)),
  };
}

/** decodeResult copies data output but neither requires the result nor checks the fence. */
function decodeReply(w: WireSnapshotReply): { frame: number; result: CallResult } {
  const result = present(w.result, "snapshot reply's result");
  if (result.output.case === "fenceValue") toSafe(result.output.value, "reply fence value");
  return { frame: toSafe(w.frame, "reply frame"), result: decodeResult(result) };
}

function decodePages(w: WireSnapshotPages): SnapshotPages {
  // Not copied: pages go straight to the device, which copies them (a worker device into a
  // buffer of its own it moves; the inline one into VRAM), and nothing keeps the view.
  return { context: w.context, bo: w.bo, firstPage: w.firstPage, data: w.data };
}
