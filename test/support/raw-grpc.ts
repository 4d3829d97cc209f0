// A gRPC stream that sends raw bytes to any method: for feeding a node malformed messages.
import * as grpc from "@grpc/grpc-js";

export function rawStream(
  address: string,
  path: string,
): { client: grpc.Client; stream: grpc.ClientDuplexStream<Buffer, Buffer> } {
  const identity = (b: Buffer) => b;
  const Raw = grpc.makeGenericClientConstructor(
    {
      call: {
        path,
        requestStream: true,
        responseStream: true,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    "Raw",
  );
  const client = new Raw(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    call(): grpc.ClientDuplexStream<Buffer, Buffer>;
  };
  return { client, stream: client.call() };
}
