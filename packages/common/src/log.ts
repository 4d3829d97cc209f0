// The logger factory: pino JSON lines. Protocol events carry role, epoch and seq as fields;
// nothing logs per frame at info.
import { type Logger, pino } from "pino";

export type { Logger };

export function createLogger(options: {
  level: string;
  nodeId: string;
  destination?: NodeJS.WritableStream;
}): Logger {
  return pino(
    {
      level: options.level,
      base: { node: options.nodeId },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ sync: false }),
  );
}
