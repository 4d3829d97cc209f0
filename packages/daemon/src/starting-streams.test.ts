// Proves that replication streams arriving before the node's first role is decided wait, unread,
// and go to the role decided in arrival order (none dropped, none handed twice); one that ends
// while parked (cancelled, closed, failed) is not handed; past the bound they are ended at once;
// after the release streams go straight to the role; a node stopping ends the parked ones.
// Over real grpc-js server streams: a hello written before the release is read by the role.
import { EventEmitter } from "node:events";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { addService, createClient, type ServiceHandlers, wire } from "@vgpu-ha/common";
import type { ReplicationCall } from "@vgpu-ha/standby";
import { describe, expect, it } from "vitest";
import { StartingStreams } from "./starting-streams.js";

class FakeStream extends EventEmitter {
  ended = false;
  constructor(readonly name: string) {
    super();
  }
  end(): void {
    this.ended = true;
  }
}

describe("StartingStreams", () => {
  it("parks streams until the role is decided, then hands them over in order", () => {
    const park = new StartingStreams<FakeStream>();
    const a = new FakeStream("a");
    const b = new FakeStream("b");
    expect(park.park(a)).toBe(true);
    expect(park.park(b)).toBe(true);
    expect(park.size).toBe(2);
    const handed: string[] = [];
    park.release((s) => handed.push(s.name));
    expect(handed).toEqual(["a", "b"]);
    expect(a.ended || b.ended).toBe(false);
    // What parking listened to is gone: the role's own listeners are the only ones.
    expect(a.listenerCount("close") + a.listenerCount("error")).toBe(0);
    expect(park.parking).toBe(false);
    expect(park.park(new FakeStream("c"))).toBe(false); // the caller hands it on itself
  });

  it("does not hand over a stream that ended while parked", () => {
    for (const event of ["cancelled", "close", "error"]) {
      const park = new StartingStreams<FakeStream>();
      const gone = new FakeStream("gone");
      const kept = new FakeStream("kept");
      park.park(gone);
      park.park(kept);
      gone.emit(event, new Error("reset"));
      const handed: string[] = [];
      park.release((s) => handed.push(s.name));
      expect(handed, event).toEqual(["kept"]);
    }
  });

  it("ends streams past its bound at once", () => {
    const park = new StartingStreams<FakeStream>(2);
    const streams = ["a", "b", "c"].map((n) => new FakeStream(n));
    for (const s of streams) expect(park.park(s)).toBe(true);
    expect(streams.map((s) => s.ended)).toEqual([false, false, true]);
    const handed: string[] = [];
    park.release((s) => handed.push(s.name));
    expect(handed).toEqual(["a", "b"]);
  });

  it("ends the parked streams when the node stops before deciding", () => {
    const park = new StartingStreams<FakeStream>();
    const a = new FakeStream("a");
    park.park(a);
    park.close();
    expect(a.ended).toBe(true);
    expect(park.park(new FakeStream("late"))).toBe(false);
  });
});

describe("StartingStreams over grpc-js", () => {
  it("keeps what the primary wrote before the release for the role to read", async () => {
    const park = new StartingStreams<ReplicationCall>();
    const server = new grpc.Server();
    const arrived = new Promise<ReplicationCall>((resolve) => {
      const handlers = {
        stream: (call: ReplicationCall) => {
          park.park(call);
          resolve(call);
        },
      } as unknown as ServiceHandlers<typeof wire.Replication>;
      addService(server, wire.Replication, handlers);
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    const client = createClient(
      wire.Replication,
      `127.0.0.1:${port}`,
      grpc.credentials.createInsecure(),
    );
    try {
      const stream = client.stream();
      stream.on("error", () => undefined); // cancelled at the end
      const hello = create(wire.PrimaryHelloSchema, { clusterId: "c" });
      stream.write(
        create(wire.PrimaryMessageSchema, { epoch: 3n, kind: { case: "hello", value: hello } }),
      );
      await arrived;
      await new Promise((r) => setTimeout(r, 50)); // the message is in the paused stream
      const read = new Promise<wire.PrimaryMessage>((resolve) => {
        park.release((call) => call.once("data", resolve));
      });
      const got = await read;
      expect(got.epoch).toBe(3n);
      expect(got.kind.case).toBe("hello");
      stream.cancel();
    } finally {
      client.close();
      server.forceShutdown();
    }
  });
});
