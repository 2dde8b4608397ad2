import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as the receiver decoded it, from either encoding: ids as hex, attributes as plain values. */
export type ReceivedSpan = {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  /** The attributes of the resource that sent it (`service.name`…). */
  resource: Record<string, unknown>;
};

/** An OTLP/HTTP trace receiver on 127.0.0.1 (what Jaeger or a Collector listens with on 4318), for tests. */
export type OtlpReceiver = {
  /** The URL to give as OTEL_EXPORTER_OTLP_ENDPOINT (traces go to its /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** The content type of each export request received, in order. */
  contentTypes: string[];
  close(): Promise<void>;
};

/**
 * Starts the receiver: it decodes each export request to `/v1/traces`, OTLP/JSON
 * (`application/json`) or OTLP/protobuf (`application/x-protobuf`), and answers an empty
 * success. The protobuf decoder below is written from opentelemetry-proto's
 * `trace/v1/trace.proto` and `common/v1/common.proto` (the exporter's own writer has no reader
 * for requests, and protobufjs is not installed).
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      if (req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      try {
        spans.push(...(type.startsWith('application/json') ? fromJson(JSON.parse(body.toString('utf8'))) : fromProtobuf(body)));
      } catch (error) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(String(error));
        return;
      }
      if (type.startsWith('application/json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// OTLP/JSON: ids are hex strings, values `{stringValue}`, `{intValue}` (a number or a decimal string)…
type JsonValue = { stringValue?: string; boolValue?: boolean; intValue?: number | string; doubleValue?: number; arrayValue?: { values?: JsonValue[] } };
type JsonKeyValue = { key: string; value: JsonValue };

function fromJson(request: {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: Array<{ spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: JsonKeyValue[]; status?: { code?: number; message?: string } }> }>;
  }>;
}): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = jsonAttributes(resourceSpans.resource?.attributes);
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: jsonAttributes(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
        resource,
      })),
    );
  });
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, jsonValue(value)]));
}

function jsonValue(value: JsonValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(jsonValue);
  return undefined;
}

// OTLP/protobuf: the protobuf wire format (varints, fixed 64/32-bit, length-delimited fields).

/** One field of a message: its number and its raw value (a number for varints and fixed widths, bytes for the rest). */
type Field = { number: number; varint?: bigint; bytes?: Buffer; fixed64?: Buffer };

/** The fields of one protobuf message, in order. */
function fieldsOf(buffer: Buffer): Field[] {
  const fields: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buffer[at++];
      if (byte === undefined) throw new Error('truncated varint');
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (at < buffer.length) {
    const tag = Number(varint());
    const number = tag >>> 3;
    switch (tag & 7) {
      case 0:
        fields.push({ number, varint: varint() });
        break;
      case 1:
        fields.push({ number, fixed64: buffer.subarray(at, at + 8) });
        at += 8;
        break;
      case 2: {
        const length = Number(varint());
        fields.push({ number, bytes: buffer.subarray(at, at + length) });
        at += length;
        break;
      }
      case 5:
        at += 4;
        break;
      default:
        throw new Error(`unexpected wire type ${tag & 7}`);
    }
  }
  return fields;
}

/** ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; } */
function fromProtobuf(body: Buffer): ReceivedSpan[] {
  return fieldsOf(body)
    .filter((field) => field.number === 1)
    .flatMap((field) => resourceSpansOf(field.bytes!));
}

/** ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }, Resource { repeated KeyValue attributes = 1; } */
function resourceSpansOf(buffer: Buffer): ReceivedSpan[] {
  const fields = fieldsOf(buffer);
  const resourceField = fields.find((field) => field.number === 1);
  const resource = resourceField ? attributesOf(fieldsOf(resourceField.bytes!).filter((field) => field.number === 1)) : {};
  return fields
    .filter((field) => field.number === 2)
    // ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
    .flatMap((scope) => fieldsOf(scope.bytes!).filter((field) => field.number === 2))
    .map((span) => spanOf(span.bytes!, resource));
}

/**
 * Span { bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4; string name = 5;
 * SpanKind kind = 6; repeated KeyValue attributes = 9; Status status = 15; }
 */
function spanOf(buffer: Buffer, resource: Record<string, unknown>): ReceivedSpan {
  const fields = fieldsOf(buffer);
  const bytes = (number: number) => fields.find((field) => field.number === number)?.bytes;
  const statusFields = bytes(15) ? fieldsOf(bytes(15)!) : [];
  return {
    traceId: bytes(1)?.toString('hex') ?? '',
    spanId: bytes(2)?.toString('hex') ?? '',
    parentSpanId: bytes(4)?.toString('hex') ?? '',
    name: bytes(5)?.toString('utf8') ?? '',
    kind: Number(fields.find((field) => field.number === 6)?.varint ?? 0n),
    attributes: attributesOf(fields.filter((field) => field.number === 9)),
    // Status { string message = 2; StatusCode code = 3; }
    status: {
      code: Number(statusFields.find((field) => field.number === 3)?.varint ?? 0n),
      message: statusFields.find((field) => field.number === 2)?.bytes?.toString('utf8') ?? '',
    },
    resource,
  };
}

/** KeyValue { string key = 1; AnyValue value = 2; } */
function attributesOf(keyValues: Field[]): Record<string, unknown> {
  return Object.fromEntries(
    keyValues.map((keyValue) => {
      const fields = fieldsOf(keyValue.bytes!);
      const key = fields.find((field) => field.number === 1)?.bytes?.toString('utf8') ?? '';
      const value = fields.find((field) => field.number === 2);
      return [key, value ? anyValueOf(value.bytes!) : undefined];
    }),
  );
}

/**
 * AnyValue { oneof: string string_value = 1; bool bool_value = 2; int64 int_value = 3;
 * double double_value = 4; ArrayValue array_value = 5; }, ArrayValue { repeated AnyValue values = 1; }
 */
function anyValueOf(buffer: Buffer): unknown {
  const field = fieldsOf(buffer)[0];
  if (!field) return undefined;
  switch (field.number) {
    case 1:
      return field.bytes!.toString('utf8');
    case 2:
      return field.varint !== 0n;
    case 3:
      return Number(BigInt.asIntN(64, field.varint!));
    case 4:
      return field.fixed64!.readDoubleLE(0);
    case 5:
      return fieldsOf(field.bytes!)
        .filter((value) => value.number === 1)
        .map((value) => anyValueOf(value.bytes!));
    default:
      return undefined;
  }
}
