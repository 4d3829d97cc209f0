// The session attacks, each from its own client process (session-client.ts):
//   abandonSessions: a guest process opens `count` sessions and is SIGKILLed (no Close);
//   manySessions:    one guest process opens `count` sessions, all open at once.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { AttackOutcome } from "./outcome.js";
import { SESSION_CLIENT as CLIENT } from "./paths.js";

export interface SessionsSpec {
  /** host:port of the guest port. */
  readonly target: string;
  readonly tenant: string;
  readonly token: string;
  readonly count: number;
}

interface ClientReport {
  readonly opened: number;
  readonly failed: Record<string, number>;
}

/** Starts the client; resolves with its report line and the process (still running or not). */
function runClient(mode: "abandon" | "hold", spec: SessionsSpec) {
  const child = spawn(
    process.execPath,
    [CLIENT, mode, spec.target, spec.tenant, spec.token, String(spec.count)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const killer = () => child.kill("SIGKILL");
  process.once("exit", killer);
  child.once("exit", () => process.off("exit", killer));
  const report = new Promise<ClientReport>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (line) => resolve(JSON.parse(line) as ClientReport));
    child.once("exit", (code) =>
      reject(new Error(`session client exited (${code}) without a report`)),
    );
    setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error("session client gave no report in 120 s"));
    }, 120_000).unref();
  });
  return { child, report };
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => child.once("exit", () => r()));

function outcome(report: ClientReport, note: string): AttackOutcome {
  return {
    sent: {
      "session opens": report.opened + Object.values(report.failed).reduce((a, b) => a + b, 0),
    },
    answers: { opened: report.opened, ...report.failed },
    note,
  };
}

export async function abandonSessions(spec: SessionsSpec): Promise<AttackOutcome> {
  const { child, report } = runClient("abandon", spec);
  try {
    const r = await report;
    return outcome(
      r,
      `a guest process opened ${r.opened} of ${spec.count} sessions and was killed without Close`,
    );
  } finally {
    child.kill("SIGKILL");
    await exited(child);
  }
}

export async function manySessions(spec: SessionsSpec): Promise<AttackOutcome> {
  const { child, report } = runClient("hold", spec);
  try {
    const r = await report;
    return outcome(r, `one guest process held ${r.opened} of ${spec.count} sessions open at once`);
  } finally {
    await Promise.race([exited(child), new Promise((r) => setTimeout(r, 10_000))]);
    child.kill("SIGKILL");
    await exited(child);
  }
}
