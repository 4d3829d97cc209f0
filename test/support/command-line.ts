// Parsing a harness's command line with commander: --help reported as "help", every commander
// error as a UsageError carrying the usage text, stray arguments refused.
import { type Command, CommanderError } from "commander";

export class UsageError extends Error {}

/** Parses `argv` (user arguments only) into `cmd`; "help" when help was shown. */
export function parseCommand(cmd: Command, argv: readonly string[]): Command | "help" {
  try {
    cmd.parse([...argv], { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === "commander.helpDisplayed" || e.code === "commander.help") return "help";
      throw new UsageError(`${e.message.replace(/^error: /, "")}\n\n${cmd.helpInformation()}`);
    }
    throw e;
  }
  if (cmd.args.length > 0) {
    throw new UsageError(`unexpected argument ${cmd.args[0]}\n\n${cmd.helpInformation()}`);
  }
  return cmd;
}
