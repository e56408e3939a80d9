import { z } from 'zod';
import { ERROR_TRAITS, ErrorCode } from '../../../adapters/protocol/errors.js';
import { ErrorResponse } from '../../../adapters/protocol/http-responses.js';
import { shoalVersion } from '../../settings/package-version.js';
import { ROUTE_TABLE, type RouteAccess, type RouteDoc } from './route-table.js';

/**
 * The OpenAPI 3.1 document of the gateway, built from ROUTE_TABLE: JSON Schema 2020-12 (OpenAPI
 * 3.1's dialect) straight from the zod schemas the routes validate with. Requests are described
 * as callers send them (zod's input side: defaults optional), answers as the gateway sends them.
 * Built once per gateway: it depends on whether tokens are configured (the `security` of each
 * operation), nothing else about the deployment shows (no index names, no model paths).
 */

export interface OpenApiOptions {
  /** Tokens are configured: protected operations carry the bearer scheme. */
  authEnabled: boolean;
  /** --metrics-auth: /metrics needs the token too. */
  protectMetrics: boolean;
}

type JsonObject = Record<string, unknown>;

/** Codes any route may answer: a malformed body, a wrong token, the router's own refusals, a failure. */
const COMMON_ERRORS: readonly ErrorCode[] = [ErrorCode.INVALID_INPUT, ErrorCode.UNSUPPORTED_MEDIA_TYPE, ErrorCode.INTERNAL];

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
  // `unrepresentable: 'any'`: a refinement or transform has no JSON Schema; its base type stands for it.
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' });
  return rest;
}

/** `/v1/jobs/:id` → `/v1/jobs/{id}`; the model route's wildcard is the model id. */
export function openApiPath(path: string): string {
  return path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? `{${segment.slice(1)}}` : segment === '*' ? '{model}' : segment))
    .join('/');
}

function pathParameters(path: string): JsonObject[] {
  const names = openApiPath(path).match(/\{[^}]+\}/g) ?? [];
  return names.map((braced) => {
    const name = braced.slice(1, -1);
    const description = name === 'model' ? 'a model id; its slash raw or %-encoded (BAAI/bge-small-en-v1.5)' : undefined;
    return { name, in: 'path', required: true, schema: { type: 'string' }, ...(description === undefined ? {} : { description }) };
  });
}

function queryParameters(query: z.ZodObject | undefined): JsonObject[] {
  if (query === undefined) return [];
  const schema = jsonSchema(query, 'input');
  const properties = (schema.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  return Object.entries(properties).map(([name, property]) => ({ name, in: 'query', required: required.has(name), schema: property }));
}

/** A multipart form: its text fields, and `file` parts (one or more). */
function formSchema(fields: z.ZodObject | undefined): JsonObject {
  const schema = fields === undefined ? { type: 'object', properties: {} } : jsonSchema(fields, 'input');
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  const required = Array.isArray(schema.required) ? schema.required : [];
  const file = { type: 'array', minItems: 1, items: { type: 'string', contentMediaType: 'application/octet-stream' } };
  return { ...schema, properties: { ...properties, file }, required: [...required, 'file'], additionalProperties: false };
}

function requestBody(route: RouteDoc): JsonObject | undefined {
  if (route.body === undefined) return undefined;
  const content: JsonObject = { 'application/json': { schema: jsonSchema(route.body, 'input') } };
  for (const type of route.altBody?.contentTypes ?? []) {
    content[type] = type === 'multipart/form-data' ? { schema: formSchema(route.altBody?.form) } : { schema: { type: 'string', contentMediaType: type } };
  }
  return { required: true, content, ...(route.altBody === undefined ? {} : { description: `Or ${route.altBody.description}.` }) };
}

function isProtected(access: RouteAccess, options: OpenApiOptions): boolean {
  if (!options.authEnabled) return false;
  return access === 'token' || (access === 'metrics' && options.protectMetrics);
}

function responses(route: RouteDoc, options: OpenApiOptions): JsonObject {
  const out: JsonObject = {};
  for (const [status, answer] of Object.entries(route.responses)) {
    const content = answer.schema === undefined ? { [answer.contentType ?? 'application/octet-stream']: {} } : { 'application/json': { schema: jsonSchema(answer.schema, 'output') } };
    out[status] = { description: answer.description, content };
  }
  const codes = [...COMMON_ERRORS, ...route.errors, ...(isProtected(route.access, options) ? [ErrorCode.UNAUTHORIZED] : [])];
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const code of codes) {
    const status = ERROR_TRAITS[code].httpStatus;
    byStatus.set(status, (byStatus.get(status) ?? new Set()).add(code));
  }
  for (const [status, set] of [...byStatus].sort(([a], [b]) => a - b)) {
    out[String(status)] = { description: [...set].join(', '), content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  }
  return out;
}

function operation(route: RouteDoc, options: OpenApiOptions): JsonObject {
  const parameters = [...pathParameters(route.path), ...queryParameters(route.query), ...queryParameters(route.altBody?.query)];
  const body = requestBody(route);
  return {
    operationId: `${route.method.toLowerCase()}${openApiPath(route.path).replace(/[^A-Za-z0-9]+(.)?/g, (_match, next: string | undefined) => (next ?? '').toUpperCase())}`,
    tags: [route.tag],
    summary: route.summary,
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(body === undefined ? {} : { requestBody: body }),
    responses: responses(route, options),
    security: isProtected(route.access, options) ? [{ bearerAuth: [] }] : [],
  };
}

export function buildOpenApiDocument(options: OpenApiOptions, routes: readonly RouteDoc[] = ROUTE_TABLE): JsonObject {
  const paths: Record<string, JsonObject> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(route, options) };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Shoal gateway',
      version: shoalVersion(),
      description:
        'Small ML models (encode, score, extract, tokenize), asynchronous jobs, document ingest and search over HTTP. Every refusal is `{"error": {"code", "message", "details?"}}`; retryable codes carry Retry-After. ' +
        (options.authEnabled ? 'This gateway requires `Authorization: Bearer <token>` on the operations marked with bearerAuth.' : 'This gateway runs without tokens.'),
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      schemas: { Error: jsonSchema(ErrorResponse, 'output') },
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'One of the tokens of SHOAL_API_TOKENS / SHOAL_API_TOKENS_FILE' } },
    },
  };
}
