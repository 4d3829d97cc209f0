// One end of the raw loopback TCP reference, run in its own process (forked by raw-tcp.ts):
//   sink BYTES [fresh]  listens on any loopback port, says {port}, reads BYTES from one
//                       connection and says {bytes, seconds} (first byte to last byte); with
//                       "fresh" it also copies every byte read into memory it never touched
//                       before, one SharedArrayBuffer of BYTES made as the first byte arrives
//                       (what a fresh standby must do at least: its VRAM is such memory)
//   source PORT BYTES   says {started}, waits for {go} (its parent may pin it meanwhile),
//                       connects and writes BYTES in 1 MiB writes, honouring back-pressure,
//                       and says {done} when the connection closed
import net from "node:net";
import { performance } from "node:perf_hooks";

const WRITE_BYTES = 2 ** 20;

const [mode, ...args] = process.argv.slice(2);
const send = (m: object) => process.send!(m);

if (mode === "sink") sink(Number(args[0]), args[1] === "fresh");
else if (mode === "source") source(Number(args[0]), Number(args[1]));
else throw new Error(`tcp-pump-child: unknown mode ${mode}`);

function sink(total: number, fresh: boolean): void {
  const server = net.createServer((socket) => {
    let received = 0;
    let firstMs = 0;
    let into: Uint8Array | undefined;
    socket.on("data", (chunk: Buffer) => {
      if (received === 0) {
        firstMs = performance.now();
        if (fresh) into = new Uint8Array(new SharedArrayBuffer(total));
      }
      into?.set(chunk.subarray(0, total - received), received);
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
  process.once("message", () => pumpTo(port, total));
}

function pumpTo(port: number, total: number): void {
  const data = Buffer.alloc(WRITE_BYTES, 0xa5);
  const socket = net.connect(port, "127.0.0.1", () => {
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        sent += WRITE_BYTES;
        if (!socket.write(data)) {
          socket.once("drain", pump);
          return;
        }
      }
      socket.end();
    };
    pump();
  });
  socket.on("error", () => undefined); // the sink destroys the socket once it has everything
  socket.on("close", () => send({ done: true }));
}
