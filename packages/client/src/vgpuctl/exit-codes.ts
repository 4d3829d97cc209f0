// vgpuctl's exit codes: stable, so scripts can branch on them. Listed in `vgpuctl --help`.

export const ExitCode = {
  ok: 0,
  /** The action ran but its check failed (verify: the replicas differ). */
  checkFailed: 1,
  usage: 2,
  unreachable: 3,
  /** The node refused (409, 401, 403): its message is printed. */
  refused: 4,
  failure: 5,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export const EXIT_CODES_HELP = `
Exit codes:
  0  ok
  1  the action ran but its check failed (verify: replicas not equal)
  2  usage error (unknown command or option, bad URL, no token)
  3  a node is unreachable
  4  refused by the node (409 / 401 / 403; its message is printed)
  5  any other failure

Environment:
  VGPUCTL_NODES  default for --node, comma-separated ops URLs
  VGPUCTL_TOKEN  default for --token (the nodes' ops.token)
  (VGPU_NODES and VGPU_TOKEN, the old names, are read when the new ones are unset)

Documentation: man vgpuctl, docs/operations.md`;

/** An error that ends vgpuctl with a given exit code and a one-line message. */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  constructor(exitCode: ExitCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CliError";
    this.exitCode = exitCode;
  }
}
