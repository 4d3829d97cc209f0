// The EtcdArbiter (promise-based) as the callback etcd port the primary, standby and node
// drivers take: they run the same way in the daemon and in the simulator, which has no Promises
// on its paths.
import type { NodeEtcd } from "@vgpu-ha/common";
import type { EtcdPort } from "@vgpu-ha/primary";
import type { EtcdArbiter, EtcdView } from "./etcd-arbiter.js";

/** `guestAddress`: what an acquisition writes in the leader key (config guest.listen). */
export function etcdPort(
  arbiter: EtcdArbiter,
  guestAddress: string,
): EtcdPort & NodeEtcd<EtcdView> {
  const answer =
    <T>(fallback: T, done: (error: Error | undefined, value: T) => void) =>
    (p: Promise<T>) =>
      p.then(
        (value) => done(undefined, value),
        (error: Error) => done(error, fallback),
      );
  return {
    get holding() {
      return arbiter.holding;
    },
    leaseEndMs: () => arbiter.leaseEndMs(),
    get onLost() {
      return arbiter.onLost;
    },
    set onLost(f) {
      arbiter.onLost = f;
    },
    read: (done: (error: Error | undefined, view: EtcdView | undefined) => void) =>
      void answer(undefined as EtcdView | undefined, done)(arbiter.read()),
    acquire: (
      view: unknown,
      epoch: number,
      done: (error: Error | undefined, ok: boolean) => void,
    ) => void answer<boolean>(false, done)(arbiter.acquire(view as EtcdView, epoch, guestAddress)),
    setReplica: (
      epoch: number,
      replica: string,
      done: (error: Error | undefined, ok: boolean) => void,
    ) => void answer<boolean>(false, done)(arbiter.setReplica(epoch, replica)),
    resign: () => void arbiter.resign(),
  };
}
