// Stateless interop test: a real MCP 2026-07-28 client, the TypeScript SDK v2
// (@modelcontextprotocol/client, pinned to revision 2026-07-28: server/discover,
// no initialize, no session), talks to mcpgw, while the upstream behind it,
// @modelcontextprotocol/server-everything, speaks only the legacy revisions
// (v1 SDK, <= 2025-11-25) as a stdio child. So the gateway bridges:
//
//   - sampling/createMessage and elicitation/create, which server-everything
//     sends in the middle of a tools/call, reach the 2026 client as an
//     input_required result; the SDK fulfils it with the handlers registered
//     with setRequestHandler and retries with inputResponses + requestState,
//     and the call completes with the upstream's result
//   - a 2026 client that did not declare sampling gets -32021
//     (MissingRequiredClientCapability) from the gateway, and no other
//     client's handler is asked in its place
//   - roots/list is answered from the gateway's config (gateway.yaml.tmpl)
//   - resources/read, prompts/get and subscriptions/listen (resource
//     subscriptions) in gateway naming: tools "everything__<name>", resource
//     URIs as everything has them (unique on the route); the canonical
//     "everything+<uri>" still reads
//
//   MCPGW_URL=http://127.0.0.1:PORT/mcp node --test test/interop/stateless.test.mjs
//
// There is no direct mode (INTEROP_DIRECT): a client pinned to 2026-07-28
// cannot talk to server-everything without the gateway.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  Client,
  StreamableHTTPClientTransport,
  ProtocolError,
  MissingRequiredClientCapabilityError,
} from '@modelcontextprotocol/client';

import { textOf, assertToolOK, waitFor } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const GATEWAY_URL = process.env.MCPGW_URL;
const PROTOCOL = '2026-07-28';
const UPSTREAM = 'everything';
const TOOL = (name) => `${UPSTREAM}__${name}`;
const TEST_TIMEOUT = 20_000;
const CALL_TIMEOUT = { timeout: 15_000 }; // SDK request timeout: a hang fails, it does not stall the run

// What gateway.yaml.tmpl configures as upstream everything's roots.
const CONFIGURED_ROOT = { uri: 'file:///mcpgw-interop/everything-root', name: 'interop-configured-root' };

// server-everything's simulated resource updates (resources/subscriptions.js):
// one right away when toggled on, then every 5 s.
const UPDATE_INTERVAL_MS = 5_000;

if (!GATEWAY_URL) {
  throw new Error('set MCPGW_URL (e.g. http://127.0.0.1:18080/mcp); stateless.test.mjs has no direct mode');
}

const uid = () => `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

// ---------------------------------------------------------------- connections

/**
 * Connects a v2 client pinned to 2026-07-28 declaring the given capabilities,
 * and closes it when test t ends. c.interopTap records the wire (see tap).
 */
async function open(t, capabilities = {}, name = 'mcpgw-interop-stateless') {
  const client = new Client(
    { name, version: '0.0.0' },
    { capabilities, versionNegotiation: { mode: { pin: PROTOCOL } } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(GATEWAY_URL));
  client.interopTap = tap(transport);
  client.interopTransport = transport;
  t.after(() => client.close().catch(() => {}));
  await client.connect(transport, CALL_TIMEOUT);
  return client;
}

/**
 * tap records every message the SDK sends ({in: false}) and every message the
 * transport delivers to the SDK ({in: true}), from connect on: the
 * input_required round trips happen inside callTool and are only visible here.
 */
function tap(transport) {
  const seen = [];
  let deliver;
  const wrapped = (msg, extra) => {
    seen.push({ in: true, at: Date.now(), msg });
    deliver?.(msg, extra);
  };
  // The client assigns onmessage in connect(); wrap whatever it assigns.
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => (deliver ? wrapped : undefined),
    set: (fn) => {
      deliver = fn;
    },
  });
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    seen.push({ in: false, at: Date.now(), msg });
    return send(msg, opts);
  };
  return seen;
}

// ---------------------------------------------------------------- helpers

/** Runs a request that must fail with a JSON-RPC error; returns the error. */
async function expectProtocolError(p, what) {
  let r;
  try {
    r = await p;
  } catch (err) {
    assert.ok(
      err instanceof ProtocolError,
      `${what}: expected a JSON-RPC error (ProtocolError), got ${err?.constructor?.name}: ${err?.stack ?? err}`,
    );
    return err;
  }
  assert.fail(`${what}: expected a JSON-RPC error, got a result: ${JSON.stringify(r)}`);
}

/** The sampling answer a client returns, marked with its own tag. */
const samplingAnswer = (tag) => ({
  model: `interop-fixed-model-${tag}`,
  role: 'assistant',
  stopReason: 'endTurn',
  content: { type: 'text', text: `fixed sampling answer from 2026 client ${tag}` },
});

/**
 * Checks the multi-round trip of the tool call to `tool` recorded in wire:
 * the first tools/call was answered with one input_required result asking
 * `method`, the SDK retried the same call with the handler's answer under the
 * same key and the requestState echoed byte for byte, and the retry completed.
 * Returns the input request's params as the gateway sent them.
 */
function assertOneInputRound(wire, tool, method, answer) {
  const calls = wire.filter((w) => !w.in && w.msg.method === 'tools/call' && w.msg.params?.name === tool);
  const responseTo = (req) => wire.find((w) => w.in && w.msg.id === req.msg.id && !w.msg.method)?.msg;
  assert.equal(calls.length, 2, `expected tools/call + one retry, saw ${calls.length}: ${JSON.stringify(calls.map((c) => c.msg))}`);
  const [first, retry] = calls;

  const r1 = responseTo(first);
  assert.ok(r1?.result, `first tools/call got no result: ${JSON.stringify(r1)}`);
  assert.equal(r1.result.resultType, 'input_required', `first tools/call: ${JSON.stringify(r1)}`);
  const keys = Object.keys(r1.result.inputRequests ?? {});
  assert.equal(keys.length, 1, `expected one input request: ${JSON.stringify(r1.result.inputRequests)}`);
  const ask = r1.result.inputRequests[keys[0]];
  assert.equal(ask.method, method);
  assert.equal(typeof r1.result.requestState, 'string', 'input_required without requestState');

  assert.notEqual(retry.msg.id, first.msg.id, 'the retry reused the request id');
  assert.deepEqual(retry.msg.params.arguments, first.msg.params.arguments, 'the retry changed the arguments');
  assert.equal(retry.msg.params.requestState, r1.result.requestState, 'requestState not echoed verbatim');
  assert.deepEqual(Object.keys(retry.msg.params.inputResponses ?? {}), keys, 'inputResponses keys differ from inputRequests');
  assert.deepEqual(retry.msg.params.inputResponses[keys[0]], answer, 'inputResponses does not carry the handler\'s answer');

  const r2 = responseTo(retry);
  assert.ok(r2?.result, `the retry got no result: ${JSON.stringify(r2)}`);
  assert.equal(r2.result.resultType, 'complete', `the retry: ${JSON.stringify(r2)}`);
  return ask.params;
}

// ---------------------------------------------------------------- tests

test('connect negotiates 2026-07-28 by server/discover (no initialize, no session); tools/list is prefixed; everything__echo works', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  assert.equal(c.getNegotiatedProtocolVersion(), PROTOCOL);
  assert.equal(c.getProtocolEra(), 'modern');
  const sent = c.interopTap.filter((w) => !w.in).map((w) => w.msg.method);
  assert.equal(sent[0], 'server/discover', `first message sent: ${JSON.stringify(sent)}`);
  assert.ok(!sent.includes('initialize'), `a pinned 2026 client sent initialize: ${JSON.stringify(sent)}`);
  assert.equal(c.interopTransport.sessionId, undefined, 'the gateway issued an Mcp-Session-Id to a 2026 client');
  t.diagnostic(`server: ${JSON.stringify(c.getServerVersion())}, capabilities: ${JSON.stringify(c.getServerCapabilities())}`);
  assert.ok(c.getServerCapabilities()?.tools, 'discover result lacks the tools capability');

  const { tools } = await c.listTools(undefined, CALL_TIMEOUT);
  const names = tools.map((x) => x.name);
  for (const n of ['echo', 'trigger-sampling-request', 'trigger-elicitation-request', 'get-roots-list', 'toggle-subscriber-updates']) {
    assert.ok(names.includes(TOOL(n)), `tools/list lacks ${TOOL(n)}: ${JSON.stringify(names)}`);
  }
  for (const u of ['fs', 'memory']) {
    assert.ok(names.some((n) => n.startsWith(`${u}__`)), `tools/list has no ${u}__ tool: ${JSON.stringify(names)}`);
  }
  for (const n of names) assert.match(n, /^(everything|fs|memory)__[^_]/, `tool name not in gateway naming: ${n}`);

  const message = `stateless echo ${uid()} ünïcödé ✓`;
  const from = c.interopTap.length;
  const r = await c.callTool({ name: TOOL('echo'), arguments: { message } }, CALL_TIMEOUT);
  assertToolOK(r, 'echo');
  assert.equal(textOf(r), `Echo: ${message}`);
  // One round: a legacy upstream's plain result is marked complete for a 2026 client.
  const wire = c.interopTap.slice(from);
  assert.equal(wire.filter((w) => !w.in && w.msg.method === 'tools/call').length, 1);
  const res = wire.find((w) => w.in && w.msg.result)?.msg.result;
  assert.equal(res?.resultType, 'complete', `echo result: ${JSON.stringify(res)}`);
});

test('sampling: input_required reaches the client\'s sampling handler with the upstream\'s prompt, and the tool reports its answer', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { sampling: {} });
  const seen = [];
  c.setRequestHandler('sampling/createMessage', async (req) => {
    seen.push(req.params);
    return samplingAnswer('A');
  });

  const prompt = `stateless sampling ${uid()} ünïcödé ✓`;
  const from = c.interopTap.length;
  const r = await c.callTool({ name: TOOL('trigger-sampling-request'), arguments: { prompt, maxTokens: 33 } }, CALL_TIMEOUT);
  t.diagnostic(textOf(r));
  assertToolOK(r, 'trigger-sampling-request');

  // The handler ran once, with the upstream's request intact.
  assert.equal(seen.length, 1, `sampling handler called ${seen.length} times: ${JSON.stringify(seen)}`);
  const p = seen[0];
  assert.equal(p.maxTokens, 33);
  assert.equal(p.systemPrompt, 'You are a helpful test server.');
  assert.equal(p.temperature, 0.7);
  assert.equal(p.messages?.length, 1);
  assert.equal(p.messages[0].role, 'user');
  assert.deepEqual(p.messages[0].content, { type: 'text', text: `Resource trigger-sampling-request context: ${prompt}` });

  // On the wire: one input_required round, answered and retried.
  const asked = assertOneInputRound(c.interopTap.slice(from), TOOL('trigger-sampling-request'), 'sampling/createMessage', samplingAnswer('A'));
  assert.deepEqual(asked.messages, p.messages);

  // The answer went back upstream: the tool reports it verbatim.
  const text = textOf(r);
  assert.match(text, /^LLM sampling result: /);
  assert.deepEqual(JSON.parse(text.slice(text.indexOf('{'))), samplingAnswer('A'));
});

test('elicitation: input_required reaches the client\'s elicitation handler, and the tool reports the content it accepted', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { elicitation: { form: {} } });
  const seen = [];
  const content = {
    name: `Grace Hopper ${uid()}`,
    check: true,
    email: 'grace@example.com',
    birthdate: '1906-12-09',
    integer: 7,
    number: 2.5,
    untitledSingleSelectEnum: 'Joey',
  };
  c.setRequestHandler('elicitation/create', async (req) => {
    seen.push(req.params);
    return { action: 'accept', content };
  });

  const from = c.interopTap.length;
  const r = await c.callTool({ name: TOOL('trigger-elicitation-request'), arguments: {} }, CALL_TIMEOUT);
  t.diagnostic(textOf(r));
  assertToolOK(r, 'trigger-elicitation-request');

  assert.equal(seen.length, 1, `elicitation handler called ${seen.length} times`);
  const p = seen[0];
  assert.equal(p.message, 'Please provide inputs for the following fields:');
  assert.equal(p.mode ?? 'form', 'form');
  const schema = p.requestedSchema;
  assert.equal(schema?.type, 'object');
  assert.deepEqual(schema.required, ['name']);
  for (const k of Object.keys(content)) assert.ok(schema.properties?.[k], `requestedSchema lost property ${k}`);
  assert.equal(schema.properties.email.format, 'email');

  assertOneInputRound(c.interopTap.slice(from), TOOL('trigger-elicitation-request'), 'elicitation/create', { action: 'accept', content });

  const text = textOf(r);
  assert.match(text, /User provided the requested information!/);
  for (const line of [
    `- Name: ${content.name}`,
    '- Agreed to terms: true',
    '- Email: grace@example.com',
    '- Birthdate: 1906-12-09',
    '- Favorite Integer: 7',
    '- Favorite Number: 2.5',
  ]) {
    assert.ok(text.includes(line), `tool result lacks ${JSON.stringify(line)}: ${text}`);
  }
  const raw = JSON.parse(text.slice(text.indexOf('Raw result: ') + 'Raw result: '.length));
  assert.deepEqual(raw, { action: 'accept', content });
});

test('roots: everything__get-roots-list lists the roots configured for the upstream, and the client\'s roots handler is not asked', { timeout: TEST_TIMEOUT }, async (t) => {
  // forward_roots is off for everything (gateway.yaml.tmpl), so roots/list is
  // answered from config. (server-everything asks once, at its startup,
  // outside any call, and caches the answer for its lifetime, so even with
  // forward_roots the question would never reach a client.)
  const c = await open(t, { roots: {} });
  const asked = [];
  const clientRoot = { uri: `file:///client-only/${uid()}`, name: 'client-root' };
  c.setRequestHandler('roots/list', async (req) => {
    asked.push(req.params);
    return { roots: [clientRoot] };
  });

  const r = await c.callTool({ name: TOOL('get-roots-list'), arguments: {} }, CALL_TIMEOUT);
  const text = textOf(r);
  t.diagnostic(text);
  assertToolOK(r, 'get-roots-list');
  assert.match(text, /^Current MCP Roots \(1 total\):/, `get-roots-list: ${text}`);
  assert.ok(
    text.includes(`1. ${CONFIGURED_ROOT.name}\n   URI: ${CONFIGURED_ROOT.uri}`),
    `get-roots-list does not list the configured root ${JSON.stringify(CONFIGURED_ROOT)}: ${text}`,
  );
  assert.ok(!text.includes(clientRoot.uri), 'the client\'s own root reached the upstream although forward_roots is off');
  assert.deepEqual(asked, [], 'the client\'s roots handler was asked although forward_roots is off');
});

test('resources/read and prompts/get work for a 2026 client in gateway naming; an unknown resource is -32602', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);

  // A static document: unique on the route, so the upstream's own URI in the
  // list and in the read result; text as server-everything has it on disk.
  const doc = 'architecture.md';
  const uri = `demo://resource/static/document/${doc}`;
  const { resources } = await c.listResources(undefined, CALL_TIMEOUT);
  assert.ok(resources.some((x) => x.uri === uri), `resources/list lacks ${uri}: ${JSON.stringify(resources.map((x) => x.uri))}`);
  const rr = await c.readResource({ uri }, CALL_TIMEOUT);
  assert.equal(rr.contents?.length, 1, `resources/read: ${JSON.stringify(rr).slice(0, 500)}`);
  assert.equal(rr.contents[0].uri, uri);
  assert.equal(rr.contents[0].mimeType, 'text/markdown');
  const onDisk = await readFile(
    path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'docs', doc),
    'utf8',
  );
  assert.equal(rr.contents[0].text, onDisk, 'resources/read text differs from the document server-everything serves');

  // A templated resource (routed by its template), and the canonical
  // <upstream>+<uri> form earlier versions showed, which still reads.
  const dyn = 'demo://resource/dynamic/text/3';
  const rd = await c.readResource({ uri: dyn }, CALL_TIMEOUT);
  assert.equal(rd.contents?.[0]?.uri, dyn);
  const canonical = await c.readResource({ uri: `${UPSTREAM}+${dyn}` }, CALL_TIMEOUT);
  assert.equal(canonical.contents?.[0]?.uri, dyn, 'a canonical read names the URI as the route does');
  assert.match(rd.contents[0].text, /^Resource 3: This is a plaintext resource created at /, `dynamic text resource 3: ${JSON.stringify(rd)}`);

  // 2026-07-28 says resource-not-found is -32602.
  const missing = `demo://resource/static/document/no-such-${uid()}.md`;
  const e = await expectProtocolError(c.readResource({ uri: missing }, CALL_TIMEOUT), 'reading an unknown resource');
  t.diagnostic(`unknown resource: ${e.code} ${e.message}`);
  assert.equal(e.code, -32602, `unknown resource: ${e.code} ${e.message}`);

  // Prompts: prefixed in the list, arguments passed through.
  const { prompts } = await c.listPrompts(undefined, CALL_TIMEOUT);
  assert.ok(prompts.some((x) => x.name === TOOL('args-prompt')), `prompts/list lacks ${TOOL('args-prompt')}`);
  const simple = await c.getPrompt({ name: TOOL('simple-prompt') }, CALL_TIMEOUT);
  assert.deepEqual(simple.messages, [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt without arguments.' } }]);
  const city = `Zürich ${uid()}`;
  const args = await c.getPrompt({ name: TOOL('args-prompt'), arguments: { city, state: 'ZH' } }, CALL_TIMEOUT);
  assert.deepEqual(args.messages, [{ role: 'user', content: { type: 'text', text: `What's weather in ${city}, ZH?` } }]);
});

test('a 2026 client without sampling gets -32021 with requiredCapabilities.sampling, never another client\'s sampling handler', { timeout: 30_000 }, async (t) => {
  // Two clients at once: A declares sampling, B does not.
  const [a, b] = await Promise.all([open(t, { sampling: {} }, 'stateless-A'), open(t, {}, 'stateless-B')]);
  const seenA = [];
  let duringA; // runs inside A's sampling handler (second part)
  a.setRequestHandler('sampling/createMessage', async (req) => {
    seenA.push(req.params.messages?.[0]?.content?.text);
    if (duringA) await duringA();
    return samplingAnswer('A');
  });

  const refusal = async (prompt, what) => {
    const start = Date.now();
    const e = await expectProtocolError(
      b.callTool({ name: TOOL('trigger-sampling-request'), arguments: { prompt } }, CALL_TIMEOUT),
      what,
    );
    const took = Date.now() - start;
    t.diagnostic(`${what}: ${e.code} after ${took} ms: ${e.message} ${JSON.stringify(e.data)}`);
    assert.equal(e.code, -32021, `${what}: ${e.code} ${e.message}`);
    assert.ok(e instanceof MissingRequiredClientCapabilityError, `${what}: the SDK did not recognise -32021`);
    assert.ok(e.data?.requiredCapabilities?.sampling, `${what}: data.requiredCapabilities lacks sampling: ${JSON.stringify(e.data)}`);
    assert.ok(took < 10_000, `${what}: refusal took ${took} ms`);
  };

  // 1. B alone: refused by the gateway, A not asked.
  await refusal(`from B, first ${uid()}`, 'B calling the sampling tool');
  assert.deepEqual(seenA, [], 'A\'s sampling handler was called for B\'s request');

  // 2. While A's own call is parked on its input_required (A's handler is
  // running), B calls the same tool on the same upstream: B is still
  // refused, A's handler sees only A's request, and A's call completes.
  const promptA = `from A ${uid()}`;
  let ranDuringA = false;
  duringA = async () => {
    duringA = undefined;
    await refusal(`from B, during A ${uid()}`, 'B calling the sampling tool while A samples');
    ranDuringA = true;
  };
  const ra = await a.callTool({ name: TOOL('trigger-sampling-request'), arguments: { prompt: promptA } }, CALL_TIMEOUT);
  t.diagnostic(`A: ${textOf(ra)}`);
  assert.ok(ranDuringA, 'B\'s call during A\'s sampling did not complete its checks');
  assert.deepEqual(seenA, [`Resource trigger-sampling-request context: ${promptA}`], 'A\'s sampling handler saw requests other than its own');
  assertToolOK(ra, 'A calling the sampling tool');
  assert.deepEqual(JSON.parse(textOf(ra).slice(textOf(ra).indexOf('{'))), samplingAnswer('A'));
});

test('subscriptions/listen with resourceSubscriptions: each listener gets updates for its own URI only', { timeout: 40_000 }, async (t) => {
  const [c, other] = await Promise.all([open(t, {}, 'stateless-listener'), open(t, {}, 'stateless-other-listener')]);
  const got = [];
  const otherGot = [];
  c.setNotificationHandler('notifications/resources/updated', (n) => got.push({ at: Date.now(), uri: n.params.uri }));
  other.setNotificationHandler('notifications/resources/updated', (n) => otherGot.push({ at: Date.now(), uri: n.params.uri }));

  const uri = 'demo://resource/static/document/features.md';
  const otherUri = 'demo://resource/static/document/structure.md';
  const { resources } = await c.listResources(undefined, CALL_TIMEOUT);
  for (const u of [uri, otherUri]) {
    assert.ok(resources.some((x) => x.uri === u), `resources/list lacks ${u}`);
  }

  const sub = await c.listen({ resourceSubscriptions: [uri] }, CALL_TIMEOUT);
  t.after(() => sub.close().catch(() => {}));
  assert.deepEqual(sub.honoredFilter.resourceSubscriptions, [uri], `acknowledged filter: ${JSON.stringify(sub.honoredFilter)}`);
  const otherSub = await other.listen({ resourceSubscriptions: [otherUri] }, CALL_TIMEOUT);
  t.after(() => otherSub.close().catch(() => {}));
  assert.deepEqual(otherSub.honoredFilter.resourceSubscriptions, [otherUri]);

  // server-everything sends updates only once toggled on, for its one
  // (shared) upstream session: toggle on here, and off again at the end,
  // while c is still open (t.after hooks run in registration order, so one
  // registered here would run after open()'s close and fail).
  const toggle = async () => {
    const r = await c.callTool({ name: TOOL('toggle-subscriber-updates'), arguments: {} }, CALL_TIMEOUT);
    assertToolOK(r, 'toggle-subscriber-updates');
    return textOf(r);
  };
  let state = await toggle();
  if (state.startsWith('Stopped')) state = await toggle(); // left on by an earlier run
  assert.match(state, /^Started/, `toggle-subscriber-updates: ${state}`);

  let off;
  try {
    // One update right away (while the toggle call is in flight), then one
    // every 5 s, outside any call: wait for a periodic one too.
    await waitFor(() => got.length >= 1, UPDATE_INTERVAL_MS + 5_000, `notifications/resources/updated for ${uri}`);
    await waitFor(() => otherGot.length >= 1, UPDATE_INTERVAL_MS + 5_000, `notifications/resources/updated for ${otherUri}`);
    await waitFor(() => got.length >= 2, 2 * UPDATE_INTERVAL_MS + 2_000, `a second (periodic) update for ${uri}`);
  } finally {
    off = await toggle().catch((err) => `toggle off failed: ${err}`);
  }
  const t0 = got[0].at;
  t.diagnostic(`updates at +${got.map((g) => g.at - t0).join(', +')} ms: ${JSON.stringify(got.map((g) => g.uri))}`);
  t.diagnostic(`other listener's at +${otherGot.map((g) => g.at - t0).join(', +')} ms: ${JSON.stringify(otherGot.map((g) => g.uri))}`);
  for (const g of got) assert.equal(g.uri, uri, 'update for a URI this listener did not subscribe to (or not in gateway naming)');
  for (const g of otherGot) assert.equal(g.uri, otherUri, 'update for a URI the other listener did not subscribe to');
  assert.match(off, /^Stopped/, `toggling updates off again: ${off}`);

  await sub.close();
  assert.equal(await sub.closed, 'local');
});
