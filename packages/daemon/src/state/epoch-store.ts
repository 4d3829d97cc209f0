// The node's persisted epoch: written and fsynced (file, then directory) before the node acts
// on it, so a restarted node never serves under an epoch older than one it already used.
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";

export class EpochStore {
  private readonly dir: string;
  private readonly file: string;

  constructor(stateDir: string) {
    this.dir = stateDir;
    this.file = join(stateDir, "epoch");
  }

  /** The persisted epoch, 0 when none was ever written. */
  read(): number {
    let text: string;
    try {
      text = readFileSync(this.file, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return 0;
      throw e;
    }
    const epoch = Number(text.trim());
    if (!Number.isSafeInteger(epoch) || epoch < 0) {
      throw new Error(`${this.file} holds "${text.trim()}", not an epoch`);
    }
    return epoch;
  }

  /** Persists `epoch` durably (write a temporary file, fsync, rename, fsync the directory). */
  write(epoch: number): void {
    mkdirSync(this.dir, { recursive: true });
    const tmp = `${this.file}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, `${epoch}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.file);
    const dirFd = openSync(this.dir, "r");
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
  }
}
