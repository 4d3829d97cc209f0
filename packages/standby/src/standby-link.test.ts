// Proves a stopped StandbyLink lets no stream become live: a stream accepted before close()
// whose hello arrives after it is ended, not adopted (its replica may already be a new
// primary's state), and a stream accepted after close() is ended at once. Streams are fake
// grpc duplexes carrying wire messages.
import { EventEmitter } from "node:events";
import {
  createLogger,
  encodePrimaryMessage,
  type PrimaryMessage,
  REPLICATION_PROTOCOL_VERSION,
  type wire,
} from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";
import { Receiver } from "./core/receiver.js";
import { type ReplicationCall, StandbyLink } from "./standby-link.js";
import { testBackendOptions } from "./testing/backend-options.js";

class FakeCall extends EventEmitter {
  readonly written: wire.StandbyMessage[] = [];
  ended = false;
  getPeer(): string {
    return "127.0.0.1:40000";
  }
  write(m: wire.StandbyMessage): boolean {
    this.written.push(m);
    return true;
  }
  end(): void {
    this.ended = true;
    this.emit("close");
  }
  cancel(): void {
    this.end();
  }
  hello(epoch: number): void {
    const m: PrimaryMessage = {
      kind: "hello",
      epoch,
      clusterId: "c",
      nodeId: "a",
      firstRetainedSeq: 1,
      lastSeq: 0,
      protocolVersion: REPLICATION_PROTOCOL_VERSION,
    };
    this.emit("data", encodePrimaryMessage(m));
  }
}

function standbyLink() {
  const receiver = new Receiver(
    {
      clusterId: "c",
      nodeId: "b",
      backendOptions: testBackendOptions(),
    },
    1,
  );
  const steps: PrimaryMessage[] = [];
  const link = new StandbyLink({
    receiver,
    logger: createLogger({ level: "silent", nodeId: "b", destination: process.stdout }),
    onStep: (m) => steps.push(m),
    now: () => 0,
    identity: { clusterId: "c", nodeId: "b", peerName: "a" },
  });
  return { link, steps };
}

describe("StandbyLink after close", () => {
  it("ends a stream accepted before close instead of adopting its later hello", () => {
    const { link, steps } = standbyLink();
    const call = new FakeCall();
    link.accept(call as unknown as ReplicationCall);
    link.close("promoted");
    expect(call.ended).toBe(true);
    call.hello(1);
    expect(steps).toEqual([]);
    expect(link.connected).toBe(false);
  });

  it("ends a stream accepted after close at once", () => {
    const { link, steps } = standbyLink();
    link.close("role decided");
    const call = new FakeCall();
    link.accept(call as unknown as ReplicationCall);
    expect(call.ended).toBe(true);
    call.hello(1);
    expect(steps).toEqual([]);
  });

  it("still adopts a stream whose hello comes before close", () => {
    const { link, steps } = standbyLink();
    const call = new FakeCall();
    link.accept(call as unknown as ReplicationCall);
    call.hello(1);
    expect(link.connected).toBe(true);
    expect(steps.map((m) => m.kind)).toEqual(["hello"]);
    link.close("stopping");
    expect(call.ended).toBe(true);
  });
});
