// Proves the primary's etcd requests go one at a time, a lost key is read for at most every
// pollMs and taken back only when the acquisition rule allows it, each answer means what its
// request was for, and nothing answered after the role stopped changes anything.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type EtcdRequest, EtcdRequests } from "./primary-etcd.js";

const requests = () => new EtcdRequests({ nodeId: "a", configuredPrimary: true, pollMs: 50 });
const name = { kind: "setReplica", epoch: 2, replica: "b", purpose: "name" } as const;

describe("EtcdRequests", () => {
  it("sends one request at a time", () => {
    const r = requests();
    expect(r.begin(name)).toEqual(name);
    expect(r.busy).toBe(true);
    expect(r.begin({ ...name, purpose: "clear", replica: "" })).toBeUndefined();
    expect(r.answered(name, true)).toEqual({ kind: "named" });
    expect(r.busy).toBe(false);
  });

  it("a resign is fire-and-forget: it leaves nothing pending", () => {
    const r = requests();
    expect(r.begin({ kind: "resign" })).toEqual({ kind: "resign" });
    expect(r.busy).toBe(false);
  });

  it("reads for a lost key at most every pollMs", () => {
    const r = requests();
    expect(r.retake(100)).toEqual({ kind: "read" });
    r.readAnswered(undefined, 1);
    expect(r.retake(149)).toBeUndefined();
    expect(r.retake(150)).toEqual({ kind: "read" });
  });

  it("takes a free key back at the record's next epoch", () => {
    const r = requests();
    r.retake(0);
    const next = r.readAnswered(
      { leader: undefined, record: { epoch: 4, primary: "a", replica: "b" } },
      4,
    );
    expect(next).toEqual({ kind: "acquire", epoch: 5 });
    expect(r.answered(next!, true)).toEqual({ kind: "retaken", epoch: 5 });
  });

  it("leaves a key another node holds, and a failed read, alone", () => {
    const r = requests();
    r.retake(0);
    expect(r.readAnswered({ leader: { nodeId: "b" }, record: undefined }, 1)).toBeUndefined();
    expect(r.busy).toBe(false);
    r.retake(100);
    expect(r.readAnswered(undefined, 1)).toBeUndefined();
    expect(r.busy).toBe(false);
  });

  it("does not take back a key whose record names the peer at a newer epoch than ours", () => {
    const r = requests();
    r.retake(0);
    const record = { epoch: 7, primary: "b", replica: "" };
    expect(r.readAnswered({ leader: undefined, record }, 3)).toBeUndefined();
  });

  it("maps each answer to what its request was for; a refusal means nothing", () => {
    const r = requests();
    const clear = { ...name, purpose: "clear", replica: "" } as const;
    r.begin(clear);
    expect(r.answered(clear, true)).toEqual({ kind: "cleared" });
    const handover = { ...name, purpose: "handover" } as const;
    r.begin(handover);
    expect(r.answered(handover, true)).toEqual({ kind: "resign" });
    r.begin(name);
    expect(r.answered(name, false)).toEqual({ kind: "none" });
    expect(r.answered({ kind: "resign" }, true)).toEqual({ kind: "none" });
  });

  it("a handover's request goes out even while another is under way", () => {
    const r = requests();
    r.begin(name);
    const handover = { ...name, purpose: "handover" } as const;
    expect(r.begin(handover)).toBeUndefined();
    expect(r.begin(handover, true)).toEqual(handover);
    expect(r.answered(name, true)).toEqual({ kind: "named" });
    expect(r.answered(handover, true)).toEqual({ kind: "resign" });
    r.stop();
    expect(r.begin(handover, true)).toBeUndefined();
  });

  it("ignores every answer after stop and starts nothing more (property)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("name", "clear", "handover", "acquire"),
        fc.boolean(),
        (what, ok) => {
          const r = requests();
          let request: EtcdRequest | undefined;
          if (what === "acquire") {
            r.retake(0);
            request = r.readAnswered({ leader: undefined, record: undefined }, 1);
          } else {
            request = r.begin({ ...name, purpose: what, replica: what === "clear" ? "" : "b" });
          }
          r.stop();
          expect(r.answered(request!, ok)).toEqual({ kind: "none" });
          expect(r.begin(name)).toBeUndefined();
          expect(r.retake(10_000)).toBeUndefined();
        },
      ),
    );
  });

  it("retakes only while no request is under way", () => {
    const r = requests();
    r.begin(name);
    expect(r.retake(1_000)).toBeUndefined();
    r.answered(name, true);
    expect(r.retake(1_000)).toEqual({ kind: "read" });
  });

  it("a refused acquisition leaves the key to the next poll", () => {
    const r = requests();
    r.retake(0);
    const acquire = r.readAnswered({ leader: undefined, record: undefined }, 1);
    expect(acquire).toEqual({ kind: "acquire", epoch: 2 });
    expect(r.answered(acquire!, false)).toEqual({ kind: "none" });
    expect(r.busy).toBe(false);
    expect(r.retake(10)).toBeUndefined();
    expect(r.retake(50)).toEqual({ kind: "read" });
  });

  it("a standby-configured node takes the free key only by the record's rule", () => {
    const r = new EtcdRequests({ nodeId: "b", configuredPrimary: false, pollMs: 50 });
    r.retake(0);
    const record = { epoch: 3, primary: "b", replica: "" };
    expect(r.readAnswered({ leader: undefined, record }, 3)).toEqual({ kind: "acquire", epoch: 4 });
  });
});
