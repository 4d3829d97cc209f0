// A helper process of a benchmark: one of the small scripts in bench/, forked with an IPC
// channel, answering requests in order. Killed when the benchmark ends, fails, or exits.
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const READY_TIMEOUT_MS = 10_000;

export interface Forked<Ready, Reply> {
  readonly child: ChildProcess;
  /** The first message the script sent (its "ready" message). */
  readonly ready: Ready;
  /** Sends a request; resolves with the script's next message. */
  request(message: unknown): Promise<Reply>;
  /** Resolves with the script's next message. */
  next(): Promise<Reply>;
  stop(): Promise<void>;
}

/** Forks bench/dist/<script>.js with `args`; resolves once it sent its first message. */
export async function forkScript<Ready, Reply>(
  script: string,
  args: readonly string[],
): Promise<Forked<Ready, Reply>> {
  const file = fileURLToPath(new URL(`./${script}.js`, import.meta.url));
  const child = fork(file, [...args], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const killAtExit = () => child.kill("SIGKILL");
  process.on("exit", killAtExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const waiting: ((m: unknown) => void)[] = [];
  const inbox: unknown[] = [];
  child.on("message", (m) => {
    const w = waiting.shift();
    if (w) w(m);
    else inbox.push(m);
  });
  const next = () =>
    new Promise<Reply>((resolve, reject) => {
      if (inbox.length > 0) {
        resolve(inbox.shift() as Reply);
        return;
      }
      const onExit = () => reject(new Error(`${script} exited`));
      child.once("exit", onExit);
      waiting.push((m) => {
        child.off("exit", onExit);
        resolve(m as Reply);
      });
    });
  const stop = async () => {
    process.off("exit", killAtExit);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const timer = setTimeout(() => child.kill("SIGKILL"), READY_TIMEOUT_MS);
  try {
    const ready = (await next()) as unknown as Ready;
    return {
      child,
      ready,
      next,
      request: (message) => {
        child.send(message as object);
        return next();
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  } finally {
    clearTimeout(timer);
  }
}
