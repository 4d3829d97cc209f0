// Stray replication hellos: dials a node's replication port as if it were a primary of the
// given cluster, node id and epoch, sends a hello (and a Probe of the same identity), and
// records the answer. What a second pair with a copy-pasted peer.replicationAddress, or anyone
// on the network, would send. Bounded: `count` hellos, one at a time, each given 2 s.
import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  createClient,
  decodeStandbyMessage,
  encodePrimaryMessage,
  errorName,
  type PrimaryMessage,
  peerChannel,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import { type AttackerTls, type AttackOutcome, Tally } from "./outcome.js";

export type HelloKind = "other-cluster" | "wrong-node" | "higher-epoch";

export interface StrayHelloSpec {
  /** host:port of the node's replication port. */
  readonly target: string;
  readonly kind: HelloKind;
  /** The attacked pair's cluster id (the stray uses it where its kind says "right cluster"). */
  readonly clusterId: string;
  /** The attacked node's epoch now: the stray claims this, one more, or far more. */
  readonly epoch: number;
  /** The node id a copy-pasted pair would send (the attacked node's peer.name). */
  readonly peerName: string;
  readonly count: number;
  readonly tls?: AttackerTls;
}

/** The identity each kind of stray claims. */
export function strayIdentity(spec: StrayHelloSpec): {
  clusterId: string;
  nodeId: string;
  epoch: number;
} {
  switch (spec.kind) {
    case "other-cluster":
      return { clusterId: `${spec.clusterId}-stray`, nodeId: spec.peerName, epoch: spec.epoch };
    case "wrong-node":
      return { clusterId: spec.clusterId, nodeId: "stray-node", epoch: spec.epoch + 1 };
    case "higher-epoch":
      return {
        clusterId: `${spec.clusterId}-stray`,
        nodeId: "stray-node",
        epoch: spec.epoch + 1000,
      };
  }
}

function channelOf(tls: AttackerTls | undefined) {
  if (!tls) return { credentials: grpc.credentials.createInsecure(), options: {} };
  return peerChannel(
    {
      ca: readFileSync(tls.ca),
      cert: readFileSync(tls.cert),
      key: readFileSync(tls.key),
      names: [],
    },
    tls.serverName,
  );
}

/** One hello on a fresh stream: the first answer the node gives, or how the stream ended. */
function oneHello(
  client: ReturnType<typeof createClient<typeof wire.Replication>>,
  hello: PrimaryMessage,
): Promise<string> {
  return new Promise((resolve) => {
    const stream = client.stream();
    let done = false;
    const finish = (answer: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stream.cancel();
      resolve(answer);
    };
    const timer = setTimeout(() => finish("no answer in 2 s"), 2000);
    stream.on("data", (w: wire.StandbyMessage) => {
      const m: StandbyMessage | Error = decodeStandbyMessage(w);
      if (m instanceof Error) finish("malformed answer");
      else if (m.kind === "error") finish(`error:${errorName(m.code)}`);
      else finish(`accepted:${m.kind}`);
    });
    stream.on("error", (e: grpc.ServiceError) => finish(`grpc:${grpc.status[e.code] ?? e.code}`));
    stream.on("end", () => finish("stream ended"));
    stream.write(encodePrimaryMessage(hello));
  });
}

function oneProbe(
  client: ReturnType<typeof createClient<typeof wire.Replication>>,
  id: { clusterId: string; nodeId: string; epoch: number },
): Promise<string> {
  return new Promise((resolve) => {
    const request = create(wire.ProbeRequestSchema, { ...id, epoch: BigInt(id.epoch) });
    client.probe(request, new grpc.Metadata(), { deadline: Date.now() + 2000 }, (err, res) => {
      if (err) resolve(`probe:grpc:${grpc.status[err.code] ?? err.code}`);
      else resolve(`probe:answered:${res?.clusterId === "" ? "no-cluster-id" : "with-cluster-id"}`);
    });
  });
}

export async function strayHellos(spec: StrayHelloSpec): Promise<AttackOutcome> {
  const id = strayIdentity(spec);
  const channel = channelOf(spec.tls);
  const answers = new Tally();
  const sent = new Tally();
  const client = createClient(wire.Replication, spec.target, channel.credentials, {
    ...channel.options,
    "grpc.initial_reconnect_backoff_ms": 50,
  });
  try {
    for (let i = 0; i < spec.count; i++) {
      const hello: PrimaryMessage = {
        kind: "hello",
        epoch: id.epoch,
        clusterId: id.clusterId,
        nodeId: id.nodeId,
        firstRetainedSeq: 1,
        lastSeq: 0,
      };
      sent.add("hello");
      answers.add(await oneHello(client, hello));
      sent.add("probe");
      answers.add(await oneProbe(client, id));
    }
  } finally {
    client.close();
  }
  return {
    sent: sent.counts,
    answers: answers.counts,
    note: `${spec.count} hellos and probes as cluster ${id.clusterId}, node ${id.nodeId}, epoch ${id.epoch}${spec.tls ? `, mutual TLS with ${spec.tls.cert}` : ", plaintext"}`,
  };
}
