#!/usr/bin/env node
// A small MCP server built on the TypeScript SDK v2 server package
// (@modelcontextprotocol/server, pinned in ../package.json) that speaks only
// the stateless 2026-07-28 revision over stdio: serveStdio with
// legacy: 'reject', so an `initialize` is refused and every request must
// carry the per-request _meta envelope. mcpgw runs it as upstream "modern"
// (gateway.yaml.tmpl, protocol: "2026"); modern-upstream.test.mjs talks to
// it through the gateway with a legacy (2025-11-25, session) client.
//
// Tools:
//   echo {text}                 -> text
//   ask_sampling {prompt?}      -> input_required: sampling/createMessage;
//                                  retry -> "sampled: <answer text>"
//   ask_elicitation             -> input_required: elicitation/create (form,
//                                  "name"); retry -> "hello <name>"
//   ask_roots                   -> input_required: roots/list;
//                                  retry -> the root URIs joined with ", "
//   touch {uri}                 -> notifications/resources/updated for uri
//                                  (delivered on subscriptions/listen streams
//                                  that asked for it); "touched <uri>"
//   log {text?}                 -> one info notifications/message (only if
//                                  the request's _meta asks for a log level
//                                  that lets info through); "logged"
//   envelope                    -> JSON of what this request's _meta envelope
//                                  carried (protocol version, client
//                                  capabilities, log level), for the test
// Resource modern://doc ("the doc", subscribable); prompt greet {who}.
//
// The multi-round-trip state is the SDK's own: createRequestStateCodec (HMAC)
// mints requestState and ServerOptions.requestState.verify checks the echo,
// so a requestState the gateway altered fails the retry with -32602.
//
// MODERN_WIRE_LOG=<file>: every JSON-RPC message in and out is appended to
// <file> as one JSON line {t, dir: "in"|"out", msg}, so the test can see
// exactly what the gateway sent this upstream.

import { appendFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

import {
  McpServer,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired,
  inputResponse,
  acceptedContent,
} from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';

const WIRE_LOG = process.env.MODERN_WIRE_LOG || '';
const DOC_URI = 'modern://doc';
const DOC_TEXT = 'the doc';

const wireLog = (dir, msg) => {
  if (!WIRE_LOG) return;
  try {
    appendFileSync(WIRE_LOG, JSON.stringify({ t: Date.now(), dir, msg }) + '\n');
  } catch (err) {
    process.stderr.write(`modern-server: cannot write ${WIRE_LOG}: ${err}\n`);
  }
};

/** Records every message on the stdio wire, both ways, then passes it on. */
class TapTransport {
  constructor(inner) {
    this.inner = inner;
    inner.onmessage = (msg, extra) => {
      wireLog('in', msg);
      this.onmessage?.(msg, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (err) => this.onerror?.(err);
  }
  start() {
    return this.inner.start();
  }
  send(msg, opts) {
    wireLog('out', msg);
    return this.inner.send(msg, opts);
  }
  close() {
    return this.inner.close();
  }
}

// One key per process: the gateway keeps one stdio child, so every round of
// a flow comes back to this process.
const codec = createRequestStateCodec({
  key: randomBytes(32),
  ttlSeconds: 300,
  bind: (ctx) => ctx.mcpReq.method,
});

const ENVELOPE_PREFIX = 'io.modelcontextprotocol/';
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const toolError = (t) => ({ content: [{ type: 'text', text: t }], isError: true });
const objectSchema = (properties, required = []) =>
  fromJsonSchema({ type: 'object', properties, required, additionalProperties: false });

/**
 * The verified requestState of a retry for tool, or an error text. Every
 * input_required this server returns carries state naming the tool; a retry
 * without it (or with another tool's) was not made from our answer.
 */
function retryState(ctx, tool) {
  const st = ctx.mcpReq.requestState();
  if (st === undefined) return { error: `${tool}: retry carried no requestState` };
  if (typeof st !== 'object' || st?.tool !== tool) return { error: `${tool}: requestState is for ${JSON.stringify(st)}` };
  return { state: st };
}

function build() {
  const server = new McpServer(
    { name: 'mcpgw-interop-modern', version: '2.4.0-interop' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
      },
      requestState: { verify: codec.verify },
    },
  );

  server.registerTool(
    'echo',
    { description: 'Returns its text', inputSchema: objectSchema({ text: { type: 'string' } }, ['text']) },
    async ({ text: t }) => text(t),
  );

  server.registerTool(
    'envelope',
    { description: "Reports this request's 2026-07-28 _meta envelope as JSON", inputSchema: objectSchema({}) },
    async (_args, ctx) => {
      const env = {};
      for (const [k, v] of Object.entries(ctx.mcpReq.envelope ?? {})) {
        env[k.startsWith(ENVELOPE_PREFIX) ? k.slice(ENVELOPE_PREFIX.length) : k] = v;
      }
      return text(JSON.stringify(env));
    },
  );

  server.registerTool(
    'ask_sampling',
    {
      description: 'Asks the client to sample (input_required), returns the answer',
      inputSchema: objectSchema({ prompt: { type: 'string' } }),
    },
    async ({ prompt }, ctx) => {
      const p = prompt ?? 'Say something.';
      if (ctx.mcpReq.inputResponses === undefined) {
        return inputRequired({
          inputRequests: {
            sample: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: p } }],
              systemPrompt: 'You are the modern interop server.',
              maxTokens: 64,
            }),
          },
          requestState: await codec.mint({ tool: 'ask_sampling', prompt: p }, ctx),
        });
      }
      const { error, state } = retryState(ctx, 'ask_sampling');
      if (error) return toolError(error);
      if (state.prompt !== p) return toolError(`ask_sampling: requestState is for prompt ${JSON.stringify(state.prompt)}, not ${JSON.stringify(p)}`);
      const r = inputResponse(ctx.mcpReq.inputResponses, 'sample');
      if (r.kind !== 'sampling') return toolError(`ask_sampling: inputResponses.sample is ${JSON.stringify(r)}`);
      const c = r.result.content;
      const answer = (Array.isArray(c) ? c : [c]).filter((b) => b?.type === 'text').map((b) => b.text).join('');
      return text(`sampled: ${answer}`);
    },
  );

  server.registerTool(
    'ask_elicitation',
    { description: 'Asks the client for a name (input_required), greets it', inputSchema: objectSchema({}) },
    async (_args, ctx) => {
      if (ctx.mcpReq.inputResponses === undefined) {
        return inputRequired({
          inputRequests: {
            name: inputRequired.elicit({
              message: 'What is your name?',
              requestedSchema: {
                type: 'object',
                properties: { name: { type: 'string', title: 'Name', description: 'Your name' } },
                required: ['name'],
              },
            }),
          },
          requestState: await codec.mint({ tool: 'ask_elicitation' }, ctx),
        });
      }
      const { error } = retryState(ctx, 'ask_elicitation');
      if (error) return toolError(error);
      const r = inputResponse(ctx.mcpReq.inputResponses, 'name');
      if (r.kind !== 'elicit') return toolError(`ask_elicitation: inputResponses.name is ${JSON.stringify(r)}`);
      if (r.action !== 'accept') return text(`elicitation ${r.action}`);
      const content = acceptedContent(ctx.mcpReq.inputResponses, 'name');
      return text(`hello ${content?.name}`);
    },
  );

  server.registerTool(
    'ask_roots',
    { description: "Lists the client's roots (input_required)", inputSchema: objectSchema({}) },
    async (_args, ctx) => {
      if (ctx.mcpReq.inputResponses === undefined) {
        return inputRequired({
          inputRequests: { roots: inputRequired.listRoots() },
          requestState: await codec.mint({ tool: 'ask_roots' }, ctx),
        });
      }
      const { error } = retryState(ctx, 'ask_roots');
      if (error) return toolError(error);
      const r = inputResponse(ctx.mcpReq.inputResponses, 'roots');
      if (r.kind !== 'roots') return toolError(`ask_roots: inputResponses.roots is ${JSON.stringify(r)}`);
      return text(r.roots.map((root) => root.uri).join(', '));
    },
  );

  server.registerTool(
    'touch',
    {
      description: 'Sends notifications/resources/updated for uri',
      inputSchema: objectSchema({ uri: { type: 'string' } }, ['uri']),
    },
    async ({ uri }) => {
      await server.server.sendResourceUpdated({ uri });
      return text(`touched ${uri}`);
    },
  );

  server.registerTool(
    'log',
    {
      description: 'Emits one info log message',
      inputSchema: objectSchema({ text: { type: 'string' } }),
    },
    async ({ text: t }, ctx) => {
      await ctx.mcpReq.log('info', t ?? 'modern log message', 'modern-server');
      return text('logged');
    },
  );

  server.registerResource(
    'doc',
    DOC_URI,
    { title: 'The doc', description: 'A static text resource', mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: DOC_TEXT }] }),
  );

  server.registerPrompt(
    'greet',
    { description: 'Greets someone', argsSchema: objectSchema({ who: { type: 'string', description: 'Whom to greet' } }, ['who']) },
    async ({ who }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${who}.` } }],
    }),
  );

  return server;
}

const transport = new TapTransport(new StdioServerTransport());
serveStdio(build, {
  legacy: 'reject',
  transport,
  onerror: (err) => process.stderr.write(`modern-server: ${err?.stack ?? err}\n`),
});
