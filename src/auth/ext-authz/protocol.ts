import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/**
 * Envoy's external-authorization protocol, `envoy.service.auth.v3.Authorization/Check`
 * (docs/authentication.md#external-authorization): the subset Tollgate sends and reads, with the
 * package names, message names and field numbers of Envoy's published definitions
 * (envoyproxy/envoy api/envoy/service/auth/v3/external_auth.proto and attribute_context.proto,
 * api/envoy/config/core/v3/base.proto and address.proto, api/envoy/type/v3/http_status.proto,
 * googleapis google/rpc/status.proto, protobuf's wrappers, timestamp and any). Fields left out are
 * skipped on decoding, as protobuf requires of any reader.
 *
 * Written as protobuf.js JSON (what @grpc/proto-loader's fromJSON takes) rather than a .proto file,
 * so the build carries it inside dist/ with the code. The tests' authorization server loads the
 * same messages from .proto text (test/fixtures/grpc/envoy-auth/), which checks this transcription.
 */

type Fields = Record<string, { type: string; id: number; rule?: 'repeated'; keyType?: string }>;
const message = (fields: Fields, oneofs?: Record<string, { oneof: string[] }>) =>
  oneofs === undefined ? { fields } : { fields, oneofs };

const DESCRIPTOR = {
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            BoolValue: message({ value: { type: 'bool', id: 1 } }),
            Timestamp: message({ seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } }),
            Any: message({ type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } }),
          },
        },
        rpc: {
          nested: {
            Status: message({
              code: { type: 'int32', id: 1 },
              message: { type: 'string', id: 2 },
              details: { type: 'google.protobuf.Any', id: 3, rule: 'repeated' },
            }),
          },
        },
      },
    },
    envoy: {
      nested: {
        type: {
          nested: {
            v3: {
              nested: {
                // The enum lists every HTTP status by name in Envoy; its values are the numbers.
                HttpStatus: message({ code: { type: 'int32', id: 1 } }),
              },
            },
          },
        },
        config: {
          nested: {
            core: {
              nested: {
                v3: {
                  nested: {
                    SocketAddress: message(
                      {
                        address: { type: 'string', id: 2 },
                        port_value: { type: 'uint32', id: 3 },
                      },
                      { port_specifier: { oneof: ['port_value'] } },
                    ),
                    Address: message(
                      { socket_address: { type: 'SocketAddress', id: 1 } },
                      { address: { oneof: ['socket_address'] } },
                    ),
                    HeaderValue: message({
                      key: { type: 'string', id: 1 },
                      value: { type: 'string', id: 2 },
                    }),
                    HeaderValueOption: message({
                      header: { type: 'HeaderValue', id: 1 },
                      append: { type: 'google.protobuf.BoolValue', id: 2 },
                      // HeaderAppendAction: APPEND_IF_EXISTS_OR_ADD 0, ADD_IF_ABSENT 1,
                      // OVERWRITE_IF_EXISTS_OR_ADD 2, OVERWRITE_IF_EXISTS 3.
                      append_action: { type: 'int32', id: 3 },
                    }),
                  },
                },
              },
            },
          },
        },
        service: {
          nested: {
            auth: {
              nested: {
                v3: {
                  nested: {
                    AttributeContext: {
                      fields: {
                        source: { type: 'Peer', id: 1 },
                        destination: { type: 'Peer', id: 2 },
                        request: { type: 'Request', id: 4 },
                        context_extensions: { type: 'string', keyType: 'string', id: 10 },
                        tls_session: { type: 'TLSSession', id: 12 },
                      },
                      nested: {
                        Peer: message({
                          address: { type: 'envoy.config.core.v3.Address', id: 1 },
                          service: { type: 'string', id: 2 },
                          principal: { type: 'string', id: 4 },
                          certificate: { type: 'string', id: 5 },
                        }),
                        Request: message({
                          time: { type: 'google.protobuf.Timestamp', id: 1 },
                          http: { type: 'HttpRequest', id: 2 },
                        }),
                        HttpRequest: message({
                          id: { type: 'string', id: 1 },
                          method: { type: 'string', id: 2 },
                          headers: { type: 'string', keyType: 'string', id: 3 },
                          path: { type: 'string', id: 4 },
                          host: { type: 'string', id: 5 },
                          scheme: { type: 'string', id: 6 },
                          query: { type: 'string', id: 7 },
                          fragment: { type: 'string', id: 8 },
                          size: { type: 'int64', id: 9 },
                          protocol: { type: 'string', id: 10 },
                          body: { type: 'string', id: 11 },
                          raw_body: { type: 'bytes', id: 12 },
                        }),
                        TLSSession: message({ sni: { type: 'string', id: 1 } }),
                      },
                    },
                    CheckRequest: message({ attributes: { type: 'AttributeContext', id: 1 } }),
                    DeniedHttpResponse: message({
                      status: { type: 'envoy.type.v3.HttpStatus', id: 1 },
                      headers: { type: 'envoy.config.core.v3.HeaderValueOption', id: 2, rule: 'repeated' },
                      body: { type: 'string', id: 3 },
                    }),
                    OkHttpResponse: message({
                      headers: { type: 'envoy.config.core.v3.HeaderValueOption', id: 2, rule: 'repeated' },
                      headers_to_remove: { type: 'string', id: 5, rule: 'repeated' },
                      response_headers_to_add: {
                        type: 'envoy.config.core.v3.HeaderValueOption',
                        id: 6,
                        rule: 'repeated',
                      },
                    }),
                    CheckResponse: message(
                      {
                        status: { type: 'google.rpc.Status', id: 1 },
                        denied_response: { type: 'DeniedHttpResponse', id: 2 },
                        ok_response: { type: 'OkHttpResponse', id: 3 },
                      },
                      { http_response: { oneof: ['denied_response', 'ok_response'] } },
                    ),
                    Authorization: {
                      methods: { Check: { requestType: 'CheckRequest', responseType: 'CheckResponse' } },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
};

/** CheckResponse as proto-loader decodes it (keepCase, longs and enums as numbers, oneofs named). */
export interface HeaderValueOption {
  header?: { key?: string; value?: string } | null;
  append?: { value?: boolean } | null;
  append_action?: number;
}

export interface CheckResponse {
  status?: { code?: number; message?: string } | null;
  denied_response?: {
    status?: { code?: number } | null;
    headers?: HeaderValueOption[];
    body?: string;
  } | null;
  ok_response?: {
    headers?: HeaderValueOption[];
    headers_to_remove?: string[];
    response_headers_to_add?: HeaderValueOption[];
  } | null;
  http_response?: 'denied_response' | 'ok_response';
}

/** The generated client constructor of envoy.service.auth.v3.Authorization. */
export type AuthorizationClient = grpc.Client & {
  Check(
    request: unknown,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: CheckResponse) => void,
  ): grpc.ClientUnaryCall;
};

let loaded:
  | (new (
      address: string,
      credentials: grpc.ChannelCredentials,
      options?: object,
    ) => AuthorizationClient)
  | null = null;

export function authorizationClientClass() {
  if (loaded === null) {
    const definition = protoLoader.fromJSON(DESCRIPTOR as Parameters<typeof protoLoader.fromJSON>[0], {
      keepCase: true,
      longs: Number,
      enums: Number,
      oneofs: true,
      defaults: false,
    });
    const root = grpc.loadPackageDefinition(definition) as unknown as {
      envoy: { service: { auth: { v3: { Authorization: NonNullable<typeof loaded> } } } };
    };
    loaded = root.envoy.service.auth.v3.Authorization;
  }
  return loaded;
}
