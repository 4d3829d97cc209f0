// vgpuctl's exit codes: stable, so scripts can branch on them. Listed in `vgpuctl --help`.
// A refusal's exit code is keyed on the stable code the node answers (the error catalogue,
// proto/vgpu/v1/types.proto), not on its text or HTTP status.
import { ErrorCode } from "@vgpu-ha/common/core";

export const ExitCode = {
  ok: 0,
  /** The action ran but its check failed (verify: the replicas differ). */
  checkFailed: 1,
  usage: 2,
  unreachable: 3,
  /** The node refused with no code below (a wrong or missing token, admin off): message printed. */
  refused: 4,
  failure: 5,
  /** Sent to a node in the other role (NOT_PRIMARY, NOT_STANDBY). */
  wrongRole: 10,
  /** Promote refused: the primary may still hold its lease (PRIMARY_LEASED). */
  primaryLeased: 11,
  /** Promote refused: the standby is not an eligible replica (REPLICA_INELIGIBLE). */
  replicaIneligible: 12,
  /** No standby in sync to hand over to or compare with (HANDOVER_FAILED, NO_STANDBY_IN_SYNC). */
  noStandbyInSync: 13,
  /** Reinit refused: no primary in sight to resync from (NO_PRIMARY_IN_SIGHT). */
  noPrimaryInSight: 14,
  /** A switchover is already under way (SWITCHOVER_IN_PROGRESS). */
  switchoverInProgress: 15,
  /** etcd mode: another node holds the leader key (LEADER_KEY_HELD). */
  leaderKeyHeld: 16,
  /** The standby did not catch up, take over or answer in time (STANDBY_TIMED_OUT). */
  standbyTimedOut: 17,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** The exit code of each refusal code vgpuctl knows; any other refusal exits `refused`. */
const REFUSAL_EXIT: ReadonlyMap<string, ExitCode> = new Map(
  (
    [
      [ErrorCode.NOT_PRIMARY, ExitCode.wrongRole],
      [ErrorCode.NOT_STANDBY, ExitCode.wrongRole],
      [ErrorCode.PRIMARY_LEASED, ExitCode.primaryLeased],
      [ErrorCode.REPLICA_INELIGIBLE, ExitCode.replicaIneligible],
      [ErrorCode.HANDOVER_FAILED, ExitCode.noStandbyInSync],
      [ErrorCode.NO_STANDBY_IN_SYNC, ExitCode.noStandbyInSync],
      [ErrorCode.NO_PRIMARY_IN_SIGHT, ExitCode.noPrimaryInSight],
      [ErrorCode.SWITCHOVER_IN_PROGRESS, ExitCode.switchoverInProgress],
      [ErrorCode.LEADER_KEY_HELD, ExitCode.leaderKeyHeld],
      [ErrorCode.STANDBY_TIMED_OUT, ExitCode.standbyTimedOut],
    ] as const
  ).map(([code, exit]) => [ErrorCode[code], exit]),
);

/**
 * The exit code for a node's error answer: keyed on its `code` (a catalogue name) when vgpuctl
 * knows it; else `refused` for 401, 403 and 409, `failure` for anything else.
 */
export function exitCodeFor(httpStatus: number, code: string | undefined): ExitCode {
  const keyed = code === undefined ? undefined : REFUSAL_EXIT.get(code);
  if (keyed !== undefined) return keyed;
  return httpStatus === 401 || httpStatus === 403 || httpStatus === 409
    ? ExitCode.refused
    : ExitCode.failure;
}

export const EXIT_CODES_HELP = `
Exit codes:
  0  ok
  1  the action ran but its check failed (verify: replicas not equal)
  2  usage error (unknown command or option, bad URL, no token)
  3  a node is unreachable
  4  refused by the node with no code below (401 / 403 / 409: wrong token, admin off…)
  5  any other failure
  A refusal exits by the code the node answers (its message is printed):
  10  NOT_PRIMARY, NOT_STANDBY: sent to a node in the other role
  11  PRIMARY_LEASED: promote refused, the primary may still hold its lease
  12  REPLICA_INELIGIBLE: promote refused, the standby is no eligible replica
  13  HANDOVER_FAILED, NO_STANDBY_IN_SYNC: no standby in sync (switchover, demote, verify)
  14  NO_PRIMARY_IN_SIGHT: reinit refused, no primary to resync from
  15  SWITCHOVER_IN_PROGRESS: a switchover is already under way
  16  LEADER_KEY_HELD: etcd mode, another node holds the leader key
  17  STANDBY_TIMED_OUT: the standby did not catch up, take over or answer in time

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
