// Runs a developer tool's main() when its file is the one node was started with (not when a
// test imports it), and exits with what main returned (1 and the error on a throw).
import { pathToFileURL } from "node:url";

export function runIfMain(moduleUrl: string, main: (argv: string[]) => Promise<number>): void {
  if (process.argv[1] === undefined || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
