// The node's persisted epoch: written and fsynced (file, then directory) before the node acts
// on it, so a restarted node never serves under an epoch older than one it already used.
import { join } from "node:path";
import { readOrUndefined, replaceDurably } from "./durable-file.js";

export class EpochStore {
  private readonly dir: string;
  private readonly file: string;

  constructor(stateDir: string) {
    this.dir = stateDir;
    this.file = join(stateDir, "epoch");
  }

  /** The persisted epoch, 0 when none was ever written. */
  read(): number {
    const text = readOrUndefined(this.file);
    if (text === undefined) return 0;
    const epoch = Number(text.trim());
    if (!Number.isSafeInteger(epoch) || epoch < 0) {
      throw new Error(`${this.file} holds "${text.trim()}", not an epoch`);
    }
    return epoch;
  }

  /** Persists `epoch` durably (write a temporary file, fsync, rename, fsync the directory). */
  write(epoch: number): void {
    replaceDurably(this.dir, "epoch", `${epoch}\n`);
  }
}
