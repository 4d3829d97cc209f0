// Proves the state digest is canonical and complete (DESIGN §4): equal for one history on devices
// with different seeds and for sessions opened in either order; its gpu part changes with buffer
// contents, placement, mapped flags and handle counters but not with session-table-only changes,
// which its sessions part (last frame, cached replies) does see. Each case compares two states.
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { computeDigest } from "./digest.js";
import { Backend } from "./paravirt/backend.js";
import { OTHER_TENANT, TestGuest, testBackendOptions } from "./testing/test-guest.js";

/** A backend with one guest holding two mapped-or-not buffers with data. */
function history(seed: number) {
  const backend = new Backend(testBackendOptions({ device: { seed } }));
  const g = new TestGuest(backend, "g");
  const ctx = g.createContext();
  const a = g.alloc(ctx, 8192);
  const b = g.alloc(ctx, 4096);
  g.write(ctx, a, 10, Uint8Array.of(1, 2, 3));
  g.map(ctx, b);
  g.store(ctx, b, [{ offset: 8, bytes: [4, 5, 6, 7] }]);
  g.ok({ op: "fence", context: ctx });
  return { backend, g, ctx, a, b };
}

const digest = (backend: Backend) => computeDigest(backend);

describe("computeDigest", () => {
  it("is independent of the device seed (device handles differ, digests do not)", () => {
    const runs = [1, 2, 0xdeadbeef].map((seed) => history(seed).backend);
    const deviceIds = runs.map((r) => r.contexts.get(1)!.bos.get(1)!.bo.id);
    expect(new Set(deviceIds).size).toBe(3);
    for (const r of runs) expect(digest(r)).toEqual(digest(runs[0]!));
  });

  it("is hex sha-256 in three parts, state depending on both others", () => {
    const d = digest(history(1).backend);
    for (const part of [d.gpu, d.sessions, d.state]) expect(part).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set([d.gpu, d.sessions, d.state]).size).toBe(3);
  });

  it("does not depend on the order sessions were opened in", () => {
    const make = (ids: string[]) => {
      const backend = new Backend(testBackendOptions());
      for (const id of ids) new TestGuest(backend, id, OTHER_TENANT);
      return digest(backend);
    };
    expect(make(["x", "y", "z"])).toEqual(make(["z", "x", "y"]));
    expect(make(["x", "y"])).not.toEqual(make(["x", "z"]));
  });

  it("gpu part changes with one byte of contents, and comes back with it", () => {
    const { backend, g, ctx, a } = history(1);
    const before = digest(backend);
    g.write(ctx, a, 8191, Uint8Array.of(1));
    expect(digest(backend).gpu).not.toBe(before.gpu);
    g.write(ctx, a, 8191, Uint8Array.of(0));
    expect(digest(backend).gpu).toBe(before.gpu);
  });

  it("gpu part tells which buffer and which context holds the bytes", () => {
    const place = (bo: number, second: boolean) => {
      const backend = new Backend(testBackendOptions());
      const g = new TestGuest(backend, "g");
      const c1 = g.createContext();
      const c2 = g.createContext();
      for (const c of [c1, c2]) {
        g.alloc(c, 4096);
        g.alloc(c, 4096);
      }
      g.write(second ? c2 : c1, bo, 0, Uint8Array.of(9));
      return digest(backend).gpu;
    };
    const all = [place(1, false), place(2, false), place(1, true), place(2, true)];
    expect(new Set(all).size).toBe(4);
  });

  it("gpu part changes with the mapped flag", () => {
    const { backend, g, ctx, a } = history(1);
    const before = digest(backend).gpu;
    g.map(ctx, a);
    expect(digest(backend).gpu).not.toBe(before);
    g.ok({ op: "boUnmap", context: ctx, bo: a });
    expect(digest(backend).gpu).toBe(before);
  });

  it("gpu part changes with the handle counters and fence values", () => {
    const { backend, g, ctx } = history(1);
    const before = digest(backend).gpu;
    const temp = g.createContext();
    g.ok({ op: "contextDestroy", context: temp });
    const afterContext = digest(backend).gpu;
    expect(afterContext).not.toBe(before); // next context handle moved on
    const bo = g.alloc(ctx, 4096);
    g.ok({ op: "boFree", context: ctx, bo });
    const afterBo = digest(backend).gpu;
    expect(afterBo).not.toBe(afterContext); // next buffer handle moved on
    g.ok({ op: "fence", context: ctx });
    expect(digest(backend).gpu).not.toBe(afterBo);
  });

  it("sessions part changes with the last frame and the cached replies; gpu part does not", () => {
    const { backend, g, ctx, a } = history(1);
    const before = digest(backend);
    // A read changes only the session table (last frame, a cached reply with data).
    g.read(ctx, a, 0, 16);
    const afterRead = digest(backend);
    expect(afterRead.gpu).toBe(before.gpu);
    expect(afterRead.sessions).not.toBe(before.sessions);
    expect(afterRead.state).not.toBe(before.state);
    // So does a refused call.
    expect(g.call({ op: "fence", context: 99 }).code).toBe(ErrorCode.UNKNOWN_CONTEXT);
    const afterRefusal = digest(backend);
    expect(afterRefusal.gpu).toBe(before.gpu);
    expect(afterRefusal.sessions).not.toBe(afterRead.sessions);
    // And opening a session.
    new TestGuest(backend, "late");
    const afterOpen = digest(backend);
    expect(afterOpen.gpu).toBe(before.gpu);
    expect(afterOpen.sessions).not.toBe(afterRefusal.sessions);
  });

  it("sessions part sees the contents of cached replies", () => {
    const run = (value: number) => {
      const { backend, g, ctx, a } = history(1);
      g.write(ctx, a, 0, Uint8Array.of(value));
      g.read(ctx, a, 0, 1);
      g.write(ctx, a, 0, Uint8Array.of(0)); // VRAM equal again, only the cached reply differs
      return digest(backend);
    };
    const [x, y] = [run(1), run(2)];
    expect(x.gpu).toBe(y.gpu);
    expect(x.sessions).not.toBe(y.sessions);
  });

  it("sessions part sees a session's last frame", () => {
    // With the smallest reply cache (the newest reply is always kept), two refused fences and
    // three differ only in the last frame and the number of the one cached reply.
    const refusals = (frames: number) => {
      const backend = new Backend(testBackendOptions({ session: { replyCacheFrames: 0 } }));
      const g = new TestGuest(backend, "g");
      for (let i = 0; i < frames; i++) g.call({ op: "fence", context: 99 });
      expect(g.session.replies.size).toBe(1);
      return digest(backend);
    };
    const [two, three] = [refusals(2), refusals(3)];
    expect(two.gpu).toBe(three.gpu);
    expect(two.sessions).not.toBe(three.sessions);
  });
});
