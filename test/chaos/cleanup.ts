// Everything the harness creates (processes, namespaces, links, proxies, etcd) registers how to
// undo it here. run() undoes all of it once, newest first, whatever fails on the way; it is
// called on success, on failure, on an exception and on SIGINT/SIGTERM. A last synchronous
// sweep (runSync) also runs from the process's exit hook, for an exit that skipped run().

export interface Undo {
  readonly name: string;
  /** Asynchronous undo (run()). */
  readonly run: () => Promise<void> | void;
  /** Synchronous best effort for the exit hook; defaults to nothing. */
  readonly sync?: () => void;
}

export class Cleanup {
  private readonly undos: Undo[] = [];
  private running: Promise<void> | undefined;
  /** Errors met while undoing (reported, never thrown). */
  readonly errors: string[] = [];

  constructor() {
    process.on("exit", () => this.runSync());
  }

  /** Registers an undo; returns a function that runs it now (once) and unregisters it. */
  add(undo: Undo): () => Promise<void> {
    this.undos.push(undo);
    return async () => {
      const i = this.undos.indexOf(undo);
      if (i < 0) return;
      this.undos.splice(i, 1);
      await this.one(undo);
    };
  }

  private async one(undo: Undo): Promise<void> {
    try {
      await undo.run();
    } catch (e) {
      this.errors.push(`${undo.name}: ${(e as Error).message}`);
    }
  }

  /** Undoes everything registered, newest first; concurrent calls share one run. */
  run(): Promise<void> {
    this.running ??= (async () => {
      while (this.undos.length > 0) await this.one(this.undos.pop()!);
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** The synchronous parts of what is left (from the exit hook). */
  runSync(): void {
    for (const undo of this.undos.splice(0).reverse()) {
      try {
        undo.sync?.();
      } catch {
        // best effort at exit
      }
    }
  }

  /**
   * On SIGINT or SIGTERM: calls onSignal (stop the run), undoes everything, exits with
   * 128 + signal number. A second signal while cleaning exits at once after the sync sweep.
   */
  onSignals(onSignal: (signal: NodeJS.Signals) => void): void {
    let caught = false;
    for (const [signal, code] of [
      ["SIGINT", 130],
      ["SIGTERM", 143],
    ] as const) {
      process.on(signal, () => {
        if (caught) {
          this.runSync();
          process.exit(code);
        }
        caught = true;
        console.error(`\n${signal}: stopping the run and cleaning up`);
        onSignal(signal);
        void this.run().finally(() => {
          for (const e of this.errors) console.error(`cleanup: ${e}`);
          process.exit(code);
        });
      });
    }
  }
}
