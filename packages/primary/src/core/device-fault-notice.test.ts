// Proves the failed primary's notice to its standby names the guest frame of the entry that was
// running (none for an entry that is not a guest call, or one no longer in the log), and
// leaves only on a streaming connection, once every entry it names has been sent, exactly once.
import { ErrorCode, type PrimaryMessage, ReplicationLog } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { DeviceFaultNotice, framesAt } from "./device-fault-notice.js";

function log(): ReplicationLog {
  const l = new ReplicationLog(0);
  l.append({ kind: "sessionOpen", sessionId: "s", tenant: "a" }, 0);
  l.append(
    {
      kind: "call",
      sessionId: "s",
      frame: 1,
      call: { op: "contextCreate" },
      handles: { contextsCreated: [1], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
      result: { code: ErrorCode.OK, outputDigest: new Uint8Array() },
    },
    0,
  );
  return l;
}

describe("framesAt", () => {
  it("names the call entry's frame, and nothing for other entries or unknown seqs", () => {
    const l = log();
    expect(framesAt(l, 2)).toEqual([{ sessionId: "s", frame: 1, seq: 2 }]);
    expect(framesAt(l, 1)).toEqual([]);
    expect(framesAt(l, 3)).toEqual([]);
    expect(framesAt(l, 0)).toEqual([]);
  });
});

describe("DeviceFaultNotice", () => {
  it("waits for streaming and for the named entries to be sent, then leaves once", () => {
    const notice = new DeviceFaultNotice();
    const out: PrimaryMessage[] = [];
    notice.poll(true, 10, 2, out);
    expect(out).toEqual([]); // nothing raised
    notice.raise([{ sessionId: "s", frame: 4, seq: 9 }], "thread died");
    notice.poll(false, 9, 2, out);
    notice.poll(true, 8, 2, out);
    expect(out).toEqual([]);
    expect(notice.sent).toBe(false);
    notice.poll(true, 9, 2, out);
    expect(out).toEqual([
      {
        kind: "deviceFault",
        epoch: 2,
        frames: [{ sessionId: "s", frame: 4, seq: 9 }],
        reason: "thread died",
      },
    ]);
    expect(notice.sent).toBe(true);
    notice.poll(true, 9, 2, out);
    expect(out).toHaveLength(1);
  });
});
