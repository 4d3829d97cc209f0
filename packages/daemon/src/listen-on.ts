// Binds a node server to host:port (IPv6 in brackets; port 0: any free port); the port it got.
import type { Server } from "node:net";

export async function listenOn(server: Server, listen: string): Promise<number> {
  const i = listen.lastIndexOf(":");
  const host = listen.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  const port = Number(listen.slice(i + 1));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  return typeof address === "object" && address !== null ? address.port : port;
}
