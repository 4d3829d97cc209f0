// The EtcdArbiter (promise-based) as the primary driver's callback etcd port: the driver runs
// the same way in the daemon and in the simulator, which has no Promises on its paths.
import type { EtcdPort } from "@vgpu-ha/primary";
import type { EtcdArbiter, EtcdView } from "./etcd-arbiter.js";

/** `guestAddress`: what an acquisition writes in the leader key (config guest.listen). */
export function etcdPort(arbiter: EtcdArbiter, guestAddress: string): EtcdPort {
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
    read: (done) => void answer(undefined as EtcdView | undefined, done)(arbiter.read()),
    acquire: (view, epoch, done) =>
      void answer<boolean>(false, done)(arbiter.acquire(view as EtcdView, epoch, guestAddress)),
    setReplica: (epoch, replica, done) =>
      void answer<boolean>(false, done)(arbiter.setReplica(epoch, replica)),
    resign: () => void arbiter.resign(),
  };
}
