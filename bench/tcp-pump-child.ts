// One end of the raw loopback TCP reference, run in its own process (forked by raw-tcp.ts):
//   sink BYTES          listens on any loopback port, says {port}, reads BYTES from one
//                       connection and says {bytes, seconds} (first byte to last byte)
//   source PORT BYTES   says {started}, waits for {go} (its parent may pin it meanwhile),
//                       connects and writes BYTES in 1 MiB writes, honouring back-pressure,
//                       and says {done} when the connection closed
// Into fresh memory (what a fresh standby does at least: its replica's VRAM is memory it never
// touched, and it reads pulled pages straight into it), the sink connects, since only a socket
// it makes can be given `onread` (a server's sockets cannot):
//   serve BYTES         listens, says {port}, writes BYTES in 1 MiB writes to the one
//                       connection, and says {done} when it closed
//   fresh PORT BYTES    says {started}, waits for {go}, connects and reads BYTES straight into
//                       one SharedArrayBuffer of BYTES made at connect, at most 1 MiB a read,
//                       and says {bytes, seconds} (first byte to last byte)
import net from "node:net";
import { performance } from "node:perf_hooks";

const WRITE_BYTES = 2 ** 20;

const [mode, ...args] = process.argv.slice(2);
const send = (m: object) => process.send!(m);

if (mode === "sink") sink(Number(args[0]));
else if (mode === "source") source(Number(args[0]), Number(args[1]));
else if (mode === "serve") serve(Number(args[0]));
else if (mode === "fresh") fresh(Number(args[0]), Number(args[1]));
else throw new Error(`tcp-pump-child: unknown mode ${mode}`);

function sink(total: number): void {
  const server = net.createServer((socket) => {
    let received = 0;
    let firstMs = 0;
    socket.on("data", (chunk: Buffer) => {
      if (received === 0) firstMs = performance.now();
      received += chunk.byteLength;
      if (received >= total) {
        send({ bytes: received, seconds: (performance.now() - firstMs) / 1000 });
        socket.destroy();
        server.close();
      }
    });
  });
  server.listen(0, "127.0.0.1", () => send({ port: (server.address() as net.AddressInfo).port }));
}

function source(port: number, total: number): void {
  send({ started: true });
  process.once("message", () => {
    const socket = net.connect(port, "127.0.0.1", () => pump(socket, total));
    socket.on("error", () => undefined); // the sink destroys the socket once it has everything
    socket.on("close", () => send({ done: true }));
  });
}

function serve(total: number): void {
  const server = net.createServer((socket) => {
    server.close();
    socket.on("error", () => undefined);
    socket.on("close", () => send({ done: true }));
    pump(socket, total);
  });
  server.listen(0, "127.0.0.1", () => send({ port: (server.address() as net.AddressInfo).port }));
}

function pump(socket: net.Socket, total: number): void {
  const data = Buffer.alloc(WRITE_BYTES, 0xa5);
  let sent = 0;
  const more = () => {
    while (sent < total) {
      sent += WRITE_BYTES;
      if (!socket.write(data)) {
        socket.once("drain", more);
        return;
      }
    }
    socket.end();
  };
  more();
}

function fresh(port: number, total: number): void {
  send({ started: true });
  process.once("message", () => {
    const memory = new Uint8Array(new SharedArrayBuffer(total));
    let received = 0;
    let firstMs = 0;
    const socket = net.connect({
      port,
      host: "127.0.0.1",
      onread: {
        buffer: () => memory.subarray(received, Math.min(total, received + WRITE_BYTES)),
        callback: (n: number) => {
          if (received === 0) firstMs = performance.now();
          received += n;
          if (received < total) return true;
          send({ bytes: received, seconds: (performance.now() - firstMs) / 1000 });
          socket.destroy();
          return false;
        },
      },
    });
    socket.on("error", () => undefined);
  });
}
