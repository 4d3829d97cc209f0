// The session attacks' guest process (one client process, as the attacks need):
//   node session-client.js abandon ENDPOINT TENANT TOKEN N  opens N sessions, prints
//     {"opened":…,"failed":{…}} and waits, sessions open, to be killed (a guest that dies
//     without Close);
//   node session-client.js hold ENDPOINT TENANT TOKEN N     opens N sessions at once, keeps
//     them all open together, prints {"opened":…,"failed":{…}}, closes them and exits.
// At most 50 opens are in flight at a time. TLS is not used (the guest port's TLS is tested
// by test/integration/tls.test.ts).
import { Session, SessionClosedError } from "@vgpu-ha/client";
import { errorName } from "@vgpu-ha/common";

const [mode, endpoint, tenant, token, countText] = process.argv.slice(2);
const count = Number(countText);
if (!(mode === "abandon" || mode === "hold") || !endpoint || !tenant || !token || !(count > 0)) {
  console.error("usage: session-client.js abandon|hold ENDPOINT TENANT TOKEN N");
  process.exit(2);
}

const sessions: Session[] = [];
const failed: Record<string, number> = {};
let next = 0;
const worker = async () => {
  while (next < count) {
    next++;
    try {
      sessions.push(
        await Session.open({
          endpoint,
          tenant,
          token,
          failoverTimeoutMs: 0,
          connectTimeoutMs: 10_000,
        }),
      );
    } catch (e) {
      const why =
        e instanceof SessionClosedError
          ? `${errorName(e.code)}: ${e.message.slice(0, 80)}`
          : (e as Error).message.slice(0, 80);
      failed[why] = (failed[why] ?? 0) + 1;
    }
  }
};
await Promise.all(Array.from({ length: Math.min(50, count) }, worker));
console.log(JSON.stringify({ opened: sessions.length, failed }));
if (mode === "hold") {
  await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
  process.exit(0);
}
// abandon: stay until killed.
setInterval(() => undefined, 60_000);
