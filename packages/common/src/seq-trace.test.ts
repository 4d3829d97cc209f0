// Proves the seq trace records nothing unless BENCH_SEQ_TRACE names a directory, and that with
// it a process writes its rows — stages with their numbers, link messages summarised by kind
// and seq, garbage collections — to DIR/seq-trace-<pid>.csv at exit: run in a child process
// on the built module (the switch is read once, when the module loads).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const MODULE = pathToFileURL(join(import.meta.dirname, "../dist/seq-trace.js")).href;
const SCRIPT = `
const m = await import(${JSON.stringify(MODULE)});
m.traceSeq("p.reply", 7, 1);
m.traceLinkMessage("send", { kind: "entries", epoch: 1, entries: [{ seq: 4 }, { seq: 5 }], primaryDoneSeq: 3 });
m.traceLinkMessage("recv", { kind: "ack", epoch: 1, receivedSeq: 5, appliedSeq: 2 });
m.traceLinkMessage("send", { kind: "heartbeat", epoch: 1, lastSeq: 9 });
globalThis.gc();
// The GC entry reaches observers from a later turn of the event loop, not before exit.
await new Promise((resolve) => setTimeout(resolve, 50));
console.log(m.seqTraceOn);
`;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function run(env: NodeJS.ProcessEnv): string {
  return execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", SCRIPT], {
    env: { PATH: process.env.PATH, ...env },
    encoding: "utf8",
  }).trim();
}

describe("seq trace", () => {
  it("is off, and writes nothing, without BENCH_SEQ_TRACE", () => {
    expect(run({})).toBe("false");
  });

  it("writes each stage, link message and GC of the process to DIR at exit", () => {
    const dir = mkdtempSync(join(tmpdir(), "seq-trace-"));
    dirs.push(dir);
    expect(run({ BENCH_SEQ_TRACE: dir })).toBe("true");
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^seq-trace-\d+\.csv$/);
    const lines = readFileSync(join(dir, files[0]!), "utf8").trim().split("\n");
    expect(lines[0]).toMatch(/^# pid \d+ argv/);
    expect(lines[1]).toBe("stage,a,b,atMs");
    const rows = lines.slice(2).map((l) => l.split(","));
    const stage = (name: string) => rows.filter((r) => r[0] === name).map((r) => [r[1], r[2]]);
    expect(stage("p.reply")).toEqual([["7", "1"]]);
    expect(stage("send.entries")).toEqual([["5", "3"]]);
    expect(stage("recv.ack")).toEqual([["5", "2"]]);
    expect(stage("send.heartbeat")).toEqual([["9", "0"]]);
    expect(stage("gc").length).toBeGreaterThan(0);
    // Wall-clock ms, in order of the calls.
    const at = rows.filter((r) => r[0] !== "gc").map((r) => Number(r[3]));
    expect(at.every((t, i) => i === 0 || t >= at[i - 1]!)).toBe(true);
    expect(Math.abs(at[0]! - Date.now())).toBeLessThan(60_000);
  });
});
