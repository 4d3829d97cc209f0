// Derives grpc-js service definitions from protobuf-es service descriptors, so servers and
// clients are typed by the generated code: path `/${typeName}/${method}`, (de)serialised with
// toBinary/fromBinary. Decoded `bytes` fields are views into grpc's receive buffer: copy what
// you keep beyond the handler.
import { type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import * as grpc from "@grpc/grpc-js";

type MethodOf<S> = S extends GenService<infer M> ? M : never;
type In<M extends GenServiceMethods[string]> = MessageShape<M["input"]>;
type Out<M extends GenServiceMethods[string]> = MessageShape<M["output"]>;

/** Server handlers, one per method, typed by kind. */
export type ServiceHandlers<S extends GenService<GenServiceMethods>> = {
  [K in keyof MethodOf<S>]: MethodOf<S>[K] extends { methodKind: "unary" }
    ? grpc.handleUnaryCall<In<MethodOf<S>[K]>, Out<MethodOf<S>[K]>>
    : MethodOf<S>[K] extends { methodKind: "server_streaming" }
      ? grpc.handleServerStreamingCall<In<MethodOf<S>[K]>, Out<MethodOf<S>[K]>>
      : MethodOf<S>[K] extends { methodKind: "client_streaming" }
        ? grpc.handleClientStreamingCall<In<MethodOf<S>[K]>, Out<MethodOf<S>[K]>>
        : grpc.handleBidiStreamingCall<In<MethodOf<S>[K]>, Out<MethodOf<S>[K]>>;
};

/** A client whose methods match the service's, typed by kind (callback style of grpc-js). */
export type ServiceClient<S extends GenService<GenServiceMethods>> = grpc.Client & {
  [K in keyof MethodOf<S>]: MethodOf<S>[K] extends { methodKind: "unary" }
    ? (
        request: In<MethodOf<S>[K]>,
        metadata: grpc.Metadata,
        options: Partial<grpc.CallOptions>,
        callback: grpc.requestCallback<Out<MethodOf<S>[K]>>,
      ) => grpc.ClientUnaryCall
    : MethodOf<S>[K] extends { methodKind: "server_streaming" }
      ? (
          request: In<MethodOf<S>[K]>,
          metadata?: grpc.Metadata,
          options?: Partial<grpc.CallOptions>,
        ) => grpc.ClientReadableStream<Out<MethodOf<S>[K]>>
      : MethodOf<S>[K] extends { methodKind: "client_streaming" }
        ? (
            metadata: grpc.Metadata,
            options: Partial<grpc.CallOptions>,
            callback: grpc.requestCallback<Out<MethodOf<S>[K]>>,
          ) => grpc.ClientWritableStream<In<MethodOf<S>[K]>>
        : (
            metadata?: grpc.Metadata,
            options?: Partial<grpc.CallOptions>,
          ) => grpc.ClientDuplexStream<In<MethodOf<S>[K]>, Out<MethodOf<S>[K]>>;
};

/**
 * A message given as its encoded bytes (a Uint8Array) goes as it is: a hot path that encodes
 * itself (wire/snapshot-pages-encode.ts, the snapshot pull) saves toBinary's copies.
 */
const serializer =
  <D extends DescMessage>(schema: D) =>
  (message: MessageShape<D> | Uint8Array): Buffer => {
    const bytes = message instanceof Uint8Array ? message : toBinary(schema, message);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };

const deserializer =
  <D extends DescMessage>(schema: D) =>
  (bytes: Buffer): MessageShape<D> =>
    fromBinary(schema, bytes);

/**
 * A method's own request deserializer, by its local name, in place of fromBinary: it must give
 * what fromBinary gives, or what the method's handler knows how to read (the replication
 * stream's chunk 0: wire/replication-codec.ts decodePrimaryStreamBytes).
 */
export type RequestDecoders = Readonly<Record<string, (bytes: Buffer) => unknown>>;

export function grpcServiceDefinition<S extends GenService<GenServiceMethods>>(
  service: S,
  requestDecoders: RequestDecoders = {},
): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    const kind = method.methodKind;
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      originalName: method.name,
      requestStream: kind === "client_streaming" || kind === "bidi_streaming",
      responseStream: kind === "server_streaming" || kind === "bidi_streaming",
      requestSerialize: serializer(method.input) as (m: unknown) => Buffer,
      requestDeserialize: requestDecoders[method.localName] ?? deserializer(method.input),
      responseSerialize: serializer(method.output) as (m: unknown) => Buffer,
      responseDeserialize: deserializer(method.output),
    };
  }
  return definition;
}

export function addService<S extends GenService<GenServiceMethods>>(
  server: grpc.Server,
  service: S,
  handlers: ServiceHandlers<S>,
  requestDecoders?: RequestDecoders,
): void {
  server.addService(
    grpcServiceDefinition(service, requestDecoders),
    handlers as unknown as grpc.UntypedServiceImplementation,
  );
}

export function createClient<S extends GenService<GenServiceMethods>>(
  service: S,
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
): ServiceClient<S> {
  const Client = grpc.makeGenericClientConstructor(grpcServiceDefinition(service), service.name);
  return new Client(address, credentials, options) as unknown as ServiceClient<S>;
}
