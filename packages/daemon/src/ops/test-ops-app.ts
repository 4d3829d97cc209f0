// For the ops app's tests: an app with the given admin token and actions (undefined: admin off),
// as a node builds it, with an empty registry and a fixed status.
import { Registry } from "prom-client";
import { type AdminActions, buildOpsApp } from "./ops-app.js";

export function testAdminApp(
  token: string | undefined,
  admin: AdminActions = {},
  role = "standby",
) {
  return buildOpsApp({
    registry: new Registry(),
    status: () => ({ role, epoch: 1 }),
    readiness: () => ({ ready: true, reason: `${role}: replica in sync` }),
    adminToken: token,
    admin,
  });
}
