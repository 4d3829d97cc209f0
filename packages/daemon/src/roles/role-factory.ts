// The daemon's roles as the node driver builds them: the primary (from the standby's replica or
// afresh), the standalone node's role, the standby (empty, or keeping the state a primary
// handed over). The simulator passes its own factory to the same driver.
import type { RoleFactory } from "@vgpu-ha/common";
import { PrimaryRole, type Takeover } from "./primary-role.js";
import type { GuestStream, RoleDeps } from "./role.js";
import { StandbyRole } from "./standby-role.js";

export function daemonRoles(
  deps: () => RoleDeps,
): RoleFactory<GuestStream, Takeover, PrimaryRole, StandbyRole> {
  return {
    primary: (takeover) => new PrimaryRole(deps(), takeover),
    standalone: () => new PrimaryRole(deps()),
    standby: (kept) => {
      const standby = new StandbyRole(deps());
      if (kept) {
        // After a handover the states are equal: keep ours and stay a replica (no snapshot).
        kept.backend.trackMmio = false;
        standby.driver.adopt(kept.backend, kept.lastSeq);
      }
      return standby;
    },
  };
}
