// The Probe between the two nodes: asking the peer what it is and holds (the node driver's
// probe port, a callback), and answering the peer's Probe. Nothing is believed from, or told
// to, a node that is not our peer (peer-identity.ts).
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  type Config,
  createClient,
  ERROR_CATALOGUE,
  errorName,
  identityRefusal,
  type PeerChannel,
  type PeerIdentityRule,
  type PeerView,
  wire,
} from "@vgpu-ha/common";
import type { ReplicationRefusals } from "./replication-refusals.js";
import type { Role } from "./roles/role.js";

export interface ProbeDeps {
  readonly config: Config;
  readonly peer: PeerChannel;
  readonly refusals: ReplicationRefusals;
  /** The node's epoch now. */
  readonly epoch: () => number;
  /** The node's role now. */
  readonly role: () => Role;
}

function identityRule(c: Config): PeerIdentityRule {
  return { clusterId: c.clusterId, nodeId: c.nodeId, peerName: c.peer.name };
}

/** Asks the peer what it is and holds; `done` gets undefined when it does not answer. */
export function probePeer(deps: ProbeDeps, done: (peer: PeerView | undefined) => void): void {
  const { config } = deps;
  const address = config.peer.replicationAddress;
  if (!address) {
    done(undefined);
    return;
  }
  const client = createClient(wire.Replication, address, deps.peer.credentials, deps.peer.options);
  const answer = (peer: PeerView | undefined) => {
    client.close();
    done(peer);
  };
  const request = create(wire.ProbeRequestSchema, {
    clusterId: config.clusterId,
    nodeId: config.nodeId,
    epoch: BigInt(deps.epoch()),
  });
  const deadline = Date.now() + Math.max(1000, config.lease.durationMs * 2);
  client.probe(request, new grpc.Metadata(), { deadline }, (err, res) => {
    if (err || !res) return answer(undefined);
    // Believe nothing (above all no epoch) from a node that is not our peer.
    const who = identityRefusal(identityRule(config), res);
    if (who !== null) {
      deps.refusals.report(who, address, "outbound");
      return answer(undefined);
    }
    const role = res.role === wire.NodeRole.PRIMARY ? "primary" : "standby";
    answer({
      nodeId: res.nodeId,
      role,
      epoch: Number(res.epoch),
      replica: res.replica,
      appliedSeq: Number(res.appliedSeq),
    });
  });
}

/** A Probe from our peer is answered; anyone else learns nothing of this node. */
export function answerProbe(
  deps: ProbeDeps,
  call: grpc.ServerUnaryCall<wire.ProbeRequest, wire.ProbeResponse>,
  callback: grpc.sendUnaryData<wire.ProbeResponse>,
): void {
  const { config } = deps;
  const who = identityRefusal(identityRule(config), call.request);
  if (who !== null) {
    deps.refusals.report(who, call.getPeer(), "inbound");
    const status = ERROR_CATALOGUE[who.code].grpcStatus;
    callback({ code: status, details: `${errorName(who.code)}: ${who.message}` });
    return;
  }
  const p = deps.role().probe();
  callback(
    null,
    create(wire.ProbeResponseSchema, {
      clusterId: config.clusterId,
      nodeId: config.nodeId,
      role: p.role === "primary" ? wire.NodeRole.PRIMARY : wire.NodeRole.STANDBY,
      epoch: BigInt(deps.epoch()),
      replica: p.replica,
      appliedSeq: BigInt(p.appliedSeq),
    }),
  );
}
