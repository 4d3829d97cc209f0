// vgpuctl's version: its package's (the same as vgpud's; `--version` on both nodes and the
// operator's host must agree before an upgrade is done, docs/operations.md).
import { readFileSync } from "node:fs";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

export const VERSION: string = pkg.version;
