// A replication stream another node opened to this primary (PrimaryDriver.acceptReplication):
// its first message decides, by the PrimaryMachine's hello rule. A stranger (another cluster or
// node) is refused before its epoch is read; a higher epoch makes this node step down; a lower
// one is told so, and its stream closed a moment later.
import {
  type Link,
  lowerEpochRefusal,
  type PrimaryMessage,
  refusalReply,
  type StandbyMessage,
  type Timers,
} from "@vgpu-ha/common";
import type { PrimaryMachine } from "./core/primary-machine.js";
import type { PrimaryObserver, PrimarySupervisor } from "./ports.js";

export interface AcceptPorts {
  /** This node, as its replies name it. */
  readonly self: { readonly clusterId: string; readonly nodeId: string };
  /** The role's decisions (undefined standalone: nothing is answered). */
  readonly machine: PrimaryMachine | undefined;
  readonly supervisor: PrimarySupervisor;
  readonly observer: PrimaryObserver;
  readonly timers: Timers;
}

export function acceptReplication(
  link: Link<StandbyMessage, PrimaryMessage>,
  remote: string,
  ports: AcceptPorts,
): void {
  const { self, machine, supervisor, observer, timers } = ports;
  const epoch = supervisor.epoch();
  let first = true;
  link.onMessage((m) => {
    if (!first || !machine) return;
    first = false;
    const decision = machine.hello(m, epoch);
    observer.hello(decision, remote);
    if (decision.kind === "refuse") {
      for (const out of refusalReply(self, decision.refusal)) link.send(out);
      link.close("not our peer");
    } else if (decision.kind === "stepDown") {
      link.close("stepping down");
      supervisor.stepDown(decision.epoch, decision.reason);
    } else {
      const { clusterId, nodeId } = self;
      for (const out of lowerEpochRefusal({ clusterId, nodeId, epoch })) link.send(out);
      timers.setTimeout(100, () => link.close("refused a lower epoch"));
    }
  });
}
