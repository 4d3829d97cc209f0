// A byte-counting TCP proxy in its own process (started by counting-proxy.ts): forwards each
// connection accepted on a loopback port to TARGET (host:port) and counts the bytes in each
// direction. Says {port} once listening; answers every message with the counts so far.
import net from "node:net";

const target = process.argv[2];
if (target === undefined) throw new Error("usage: tcp-proxy-child HOST:PORT");
const colon = target.lastIndexOf(":");
const host = target.slice(0, colon);
const port = Number(target.slice(colon + 1));

/** up: towards the target (primary → standby); down: back. */
const counts = { up: 0, down: 0, connections: 0 };

const server = net.createServer((client) => {
  counts.connections++;
  client.setNoDelay(true);
  const upstream = net.connect(port, host);
  upstream.setNoDelay(true);
  client.on("data", (chunk: Buffer) => {
    counts.up += chunk.byteLength;
  });
  upstream.on("data", (chunk: Buffer) => {
    counts.down += chunk.byteLength;
  });
  client.pipe(upstream);
  upstream.pipe(client);
  const closeBoth = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", closeBoth);
  upstream.on("error", closeBoth);
  client.on("close", closeBoth);
  upstream.on("close", closeBoth);
});

server.listen(0, "127.0.0.1", () =>
  process.send!({ port: (server.address() as net.AddressInfo).port }),
);
process.on("message", () => process.send!({ ...counts }));
process.on("SIGTERM", () => process.exit(0));
