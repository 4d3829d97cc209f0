export { type GuestServer, startGuestServer } from "./guest-server.js";
export { GuestService, type GuestServiceDeps } from "./guest-service.js";
export { TenantAuth } from "./tenant-auth.js";
