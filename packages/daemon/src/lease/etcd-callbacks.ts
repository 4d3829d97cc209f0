// The EtcdArbiter (Promises) as the callback port the standby and node drivers take: the
// drivers run the same way in the daemon and in the simulator, which has no Promises.
import type { NodeEtcd } from "@vgpu-ha/common";
import type { EtcdArbiter, EtcdView } from "./etcd-arbiter.js";

/** `guestAddress`: what an acquisition writes in the leader key (config guest.listen). */
export function etcdCallbacks(arbiter: EtcdArbiter, guestAddress: string): NodeEtcd<EtcdView> {
  return {
    read: (done) =>
      void arbiter.read().then(
        (view) => done(undefined, view),
        (e: Error) => done(e, undefined),
      ),
    acquire: (view, epoch, done) =>
      void arbiter.acquire(view, epoch, guestAddress).then(
        (ok) => done(undefined, ok),
        (e: Error) => done(e, false),
      ),
    // It logs a failed revoke itself (the lease then expires).
    resign: () => void arbiter.resign(),
  };
}
