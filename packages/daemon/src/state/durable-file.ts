// Small files in the state directory that must survive a crash as written: replaced whole
// (temporary file, fsync, rename, fsync the directory) or appended to (write, fsync).
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

/** Replaces `dir/name` with `text` durably: readers see the old content or the new, whole. */
export function replaceDurably(dir: string, name: string, text: string): void {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  const tmp = `${file}.tmp`;
  writeAndSync(openSync(tmp, "w", 0o600), text);
  renameSync(tmp, file);
  syncDirectory(dir);
}

/** Appends `text` to `dir/name` and fsyncs it (the directory too when the file is new). */
export function appendDurably(dir: string, name: string, text: string): void {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  const existed = readOrUndefined(file) !== undefined;
  writeAndSync(openSync(file, "a", 0o600), text);
  if (!existed) syncDirectory(dir);
}

/** The file's text, or undefined when it does not exist. */
export function readOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

function writeAndSync(fd: number, text: string): void {
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function syncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
