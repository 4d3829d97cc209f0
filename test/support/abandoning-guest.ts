// A guest that dies without closing its sessions, run as its own process so that killing it
// is what a crashed VM does to its streams: `node test/dist/support/abandoning-guest.js
// ENDPOINT TENANT TOKEN COUNT`. It opens COUNT sessions (at most the node's
// guest.maxStreamsPerConnection: one client process shares one HTTP/2 connection), gives each
// a context and one BO_BYTES buffer written with DMA, prints one JSON line (the session ids and
// the VRAM each holds), and then waits to be killed (SIGKILL: no Close reaches the node).
import { Session } from "@vgpu-ha/client";

const BO_BYTES = 64 * 1024;

const [endpoint, tenant, token, countText] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
];

async function openOne(): Promise<string> {
  // Generous timeouts: several of these start at once on a busy machine, and a ping answered
  // late must not look like a dead node (the default keepalive is 500 ms).
  const s = await Session.open({
    endpoint,
    tenant,
    token,
    failoverTimeoutMs: 60_000,
    connectTimeoutMs: 30_000,
    keepaliveMs: 10_000,
  });
  const ctx = await s.createContext();
  const bo = await s.allocBo(ctx, BO_BYTES);
  await s.dmaWrite(ctx, bo, 0, new Uint8Array(BO_BYTES).fill(0x5a));
  return s.id;
}

const ids = await Promise.all(Array.from({ length: Number(countText) }, openOne));
process.stdout.write(`${JSON.stringify({ ids, vramBytesEach: BO_BYTES })}\n`);
setInterval(() => undefined, 60_000); // alive until killed
