// Proves the log throttle on a fake clock: one line per key per interval, keys apart, and the
// number left out reported with the next line.
import { describe, expect, it } from "vitest";
import { LogThrottle } from "./log-throttle.js";

describe("LogThrottle", () => {
  it("logs the first event of a key, then one per interval with the count left out", () => {
    const t = new LogThrottle(1000);
    expect(t.note("auth", 0)).toEqual({ log: true, suppressed: 0 });
    expect(t.note("auth", 10)).toEqual({ log: false });
    expect(t.note("auth", 999)).toEqual({ log: false });
    expect(t.note("penalty", 500)).toEqual({ log: true, suppressed: 0 });
    expect(t.note("auth", 1000)).toEqual({ log: true, suppressed: 2 });
    expect(t.note("auth", 2500)).toEqual({ log: true, suppressed: 0 });
  });
});
