// Which I/O modules does importing a module load? A fresh `node` imports each given module in turn
// (a clean module graph: nothing loaded before but Node's own bootstrap) and reports, per module,
// the I/O builtins that appeared while it loaded. Three independent witnesses, so no path in is
// missed: an ESM resolve hook (module.register: `import "node:fs"`, `import "fs"`), a wrapper
// around Module._load (CJS `require("http2")`, as grpc-js does), and the diff of
// process.moduleLoadList (builtins loaded by Node's internals on a module's behalf). A module
// already loaded by an earlier one is charged to the earlier one.
import { execFile } from "node:child_process";
import { promisify } from "node:util";

/** The builtins that do I/O (disk, network, processes); `node:crypto`, `node:util`… are fine. */
export const IO_BUILTINS = [
  "fs",
  "fs/promises",
  "net",
  "tls",
  "http",
  "https",
  "http2",
  "dgram",
  "child_process",
] as const;

export interface ProbeFinding {
  /** The module imported (as given). */
  readonly module: string;
  /**
   * What it loaded, each builtin once: `builtin <- importer` (the first importer seen, as a path
   * or URL, or "node internals").
   */
  readonly loaded: readonly string[];
}

// The resolve hook, run on Node's hooks thread. It answers the specifier `io-probe:report` with
// what it saw since the last report (as a module whose default export is that list).
const HOOKS = `
const IO = new Set(${JSON.stringify(IO_BUILTINS)});
let seen = [];
let reports = 0;
export async function resolve(specifier, context, next) {
  if (specifier === "io-probe:report") {
    const url = "data:text/javascript,export default " + encodeURIComponent(JSON.stringify(seen))
      + "//" + reports++;
    seen = [];
    return { url, shortCircuit: true };
  }
  const resolved = await next(specifier, context);
  const name = resolved.url.startsWith("node:") ? resolved.url.slice(5) : undefined;
  if (name !== undefined && IO.has(name)) seen.push(name + " <- " + context.parentURL);
  return resolved;
}
`;

// The child's entry: registers the hook, wraps Module._load, then imports each module in turn.
const ENTRY = `
import { createRequire, register } from "node:module";
const IO = new Set(${JSON.stringify(IO_BUILTINS)});
register("data:text/javascript," + encodeURIComponent(${JSON.stringify(HOOKS)}));
const Module = createRequire(process.cwd() + "/")("node:module");
let required = [];
const load = Module._load;
Module._load = function (request, parent, isMain) {
  const name = request.startsWith("node:") ? request.slice(5) : request;
  if (IO.has(name)) required.push(name + " <- " + (parent?.filename ?? "?"));
  return load.call(this, request, parent, isMain);
};
const internal = (list) => new Set(list.filter((m) => m.startsWith("NativeModule ")).map((m) => m.slice(13)));
const findings = [];
for (const module of JSON.parse(process.argv[1])) {
  const before = internal(process.moduleLoadList);
  await import(module);
  const hooked = (await import("io-probe:report")).default;
  const native = [...internal(process.moduleLoadList)]
    .filter((m) => IO.has(m) && !before.has(m))
    .map((m) => m + " <- node internals");
  const first = new Map();
  for (const w of [...hooked, ...required, ...native]) {
    const name = w.slice(0, w.indexOf(" "));
    if (!first.has(name)) first.set(name, w);
  }
  findings.push({ module, loaded: [...first.values()] });
  required = [];
}
process.stdout.write(JSON.stringify(findings));
`;

/**
 * Imports `modules` (file URLs or bare specifiers resolvable from `cwd`) one after another in a
 * fresh `node`, and returns what each loaded of IO_BUILTINS.
 */
export async function probeImports(
  modules: readonly string[],
  cwd: string,
): Promise<ProbeFinding[]> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--input-type=module", "--eval", ENTRY, JSON.stringify(modules)],
    { cwd, maxBuffer: 16 << 20 },
  );
  return JSON.parse(stdout) as ProbeFinding[];
}
