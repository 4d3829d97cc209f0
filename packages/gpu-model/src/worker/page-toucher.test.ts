// Proves the page toucher (page-toucher.ts, issue #15): it touches every 4 KiB page of every
// buffer exactly once, in the order given, without changing a byte; it stops when told (a
// dropped snapshot); on its own thread it never undoes a write made meanwhile by another
// thread; and a snapshot restored on a device thread has its buffers touched in full while its
// pages are written (none without a core to spare), and ends equal to its source (digest).
import { describe, expect, it } from "vitest";
import { computeDigest, digestWhenDone, type StateDigest } from "../digest.js";
import { Backend } from "../paravirt/backend.js";
import { SnapshotSink } from "../snapshot/snapshot-sink.js";
import { SnapshotSource } from "../snapshot/snapshot-source.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { PageToucher, type TouchWork, touchPages } from "./page-toucher.js";
import { WorkerExecutor } from "./worker-executor.js";

const PAGE = 4096;

function work(sizes: readonly number[], fillByte?: (b: number) => number): TouchWork {
  const buffers = sizes.map((size, b) => {
    const sab = new SharedArrayBuffer(size);
    if (fillByte !== undefined) {
      const bytes = new Uint8Array(sab);
      for (let i = 0; i < size; i++) bytes[i] = (i * 7 + fillByte(b)) & 0xff;
    }
    return sab;
  });
  return { buffers, stop: new SharedArrayBuffer(4) };
}

const copies = (w: TouchWork) => w.buffers.map((b) => Buffer.from(new Uint8Array(b).slice()));
const same = (w: TouchWork, before: readonly Buffer[]) =>
  w.buffers.every((b, i) => Buffer.from(new Uint8Array(b)).equals(before[i]!));

describe("touchPages", () => {
  it("touches every page of every buffer once, in order, and changes no byte", () => {
    const w = work([PAGE, 3 * PAGE, 100 * PAGE], (b) => b + 1);
    // a zero word at a page start must stay zero too
    new Int32Array(w.buffers[2]!)[5 * (PAGE / 4)] = 0;
    const before = copies(w);
    const seen: string[] = [];
    const touched = touchPages(w, (b, p) => seen.push(`${b}:${p}`));
    expect(touched).toBe(104);
    const expected = [
      "0:0",
      ...[0, 1, 2].map((p) => `1:${p}`),
      ...Array.from({ length: 100 }, (_, p) => `2:${p}`),
    ];
    expect(seen).toEqual(expected);
    expect(same(w, before)).toBe(true);
  });

  it("stops at its next look at the flag once it is set, and touches nothing when set first", () => {
    const w = work([1000 * PAGE]);
    const stop = new Int32Array(w.stop);
    const touched = touchPages(w, (_b, p) => {
      if (p === 100) Atomics.store(stop, 0, 1);
    });
    // the flag is read every 64 pages: page 128 is the first look after page 100
    expect(touched).toBe(128);
    expect(touchPages(w)).toBe(0);
  });
});

describe("PageToucher", () => {
  it("never undoes what another thread writes while it touches", async () => {
    const size = 64 * 2 ** 20;
    const sab = new SharedArrayBuffer(size);
    const words = new Int32Array(sab);
    const toucher = new PageToucher([sab]);
    let ended = false;
    const done = toucher.done.then((n) => {
      ended = true;
      return n;
    });
    // Pass after pass of non-zero values while the toucher runs: a toucher that stored 0 (or
    // did a plain read-modify-write) would leave zeros behind, seen by a check or the last one.
    let pass = 0;
    let zerosSeen = 0;
    while (!ended) {
      pass++;
      words.fill(pass);
      for (let i = 0; i < words.length; i += PAGE / 4) if (words[i] !== pass) zerosSeen++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await done).toBe(size / PAGE);
    expect(zerosSeen).toBe(0);
    expect(words.every((v) => v === pass)).toBe(true);
  });

  it("stops early when told, leaving the buffer as it was", async () => {
    const size = 256 * 2 ** 20; // untouched memory: costs nothing until touched
    const sab = new SharedArrayBuffer(size);
    const toucher = new PageToucher([sab]);
    toucher.stop();
    const touched = await toucher.done;
    expect(touched).toBeLessThan(size / PAGE);
    expect(new Int32Array(sab, 0, 1024)[0]).toBe(0);
  });
});

/** Restores a snapshot on a device thread, checks it equals its source; the pages touched. */
async function restoreOnThread(prefaultMinCores: number): Promise<number | undefined> {
  const source = new Backend(testBackendOptions());
  const guest = new TestGuest(source, "s1");
  const ctx = guest.createContext();
  const a = guest.alloc(ctx, 64 * PAGE);
  const b = guest.alloc(ctx, 40 * PAGE + 100);
  guest.alloc(ctx, 8 * PAGE); // all zero: never sent, still touched
  guest.write(
    ctx,
    a,
    0,
    new Uint8Array(64 * PAGE).map((_, i) => (i * 13) & 0xff),
  );
  guest.write(ctx, b, 5, new Uint8Array(30 * PAGE).fill(9));
  const snapshot = new SnapshotSource(source, 1, 0, 8 * PAGE);

  const executors: WorkerExecutor[] = [];
  const sink = new SnapshotSink(
    {
      ...testBackendOptions({ device: { seed: 99 } }),
      executor: () => {
        const e = new WorkerExecutor({ maxCallMs: 10_000, prefaultMinCores });
        executors.push(e);
        return e;
      },
    },
    { snapshotId: 1, atSeq: 0 },
  );
  try {
    for (let chunk = snapshot.next(); chunk; chunk = snapshot.next()) {
      expect(sink.accept(chunk)).toBeNull();
      if (chunk.last) break;
    }
    const replica = sink.result()!;
    expect(executors).toHaveLength(1);
    const digest = await new Promise<StateDigest>((r) => digestWhenDone(replica, r));
    expect(digest).toEqual(computeDigest(source));
    return await executors[0]!.prefaulted;
  } finally {
    sink.close();
  }
}

describe("a snapshot restored on a device thread", () => {
  it("has every restored page touched and ends equal to its source", async () => {
    expect(await restoreOnThread(1)).toBe(64 + 41 + 8);
  });

  it("is not touched ahead without a core to spare, and still ends equal", async () => {
    expect(await restoreOnThread(Number.MAX_SAFE_INTEGER)).toBeUndefined();
  });
});
