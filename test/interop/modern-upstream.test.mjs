// Modern-upstream interop test: the upstream speaks only MCP 2026-07-28 and
// the downstream client only the legacy, session-based revisions, so mcpgw
// bridges in the direction stateless.test.mjs does not:
//
//   upstream   servers/modern-server.mjs on the TypeScript SDK v2 server
//              package (@modelcontextprotocol/server): serveStdio with
//              legacy: 'reject', so it refuses initialize; gateway.yaml.tmpl
//              runs it as upstream "modern" with protocol: "2026" and
//              forward_roots: true, alone on route /mcp/modern (prefixed:
//              tools "modern__<name>", resource URIs "modern+<uri>").
//   client     the v1 SDK (@modelcontextprotocol/sdk), Client +
//              StreamableHTTPClientTransport: initialize, a 2025-11-25 session.
//
// What is checked, each in its own test:
//   - the upstream is spoken to in 2026-07-28 only: the server's wire log
//     (MODERN_WIRE_LOG, written by the server itself) shows server/discover,
//     never initialize, and every request carries the 2026-07-28 _meta
//     envelope; and the envelope names the calling session's own client
//     capabilities
//   - tools/list and echo; results carry no upstream identity in _meta
//   - input_required -> sampling/createMessage, elicitation/create and
//     roots/list sent to the calling legacy client (on the call's own POST
//     stream: checked with a hand-made session that has no GET stream); its
//     answer goes back as inputResponses with the upstream's requestState
//     untouched (the server HMAC-verifies it), and the tool reports it
//   - a session without sampling gets an error, not a hang
//   - resources/read, prompts/get
//   - resources/subscribe -> subscriptions/listen; touch -> the subscribed
//     session gets notifications/resources/updated in gateway naming; none
//     after unsubscribe; shared by two sessions, released when the last
//     subscriber's session ends
//   - logging/setLevel -> per-request _meta log level; info delivered at
//     "info", not at "error"
//   - two sessions sampling at once on the one stdio child each get only
//     their own request
//
//   MCPGW_URL=http://127.0.0.1:PORT/mcp MCPGW_MODERN_WIRE_LOG=<file> \
//     node --test test/interop/modern-upstream.test.mjs
//
// (run.sh sets these; MCPGW_MODERN_URL defaults to <MCPGW_URL>/modern.)
// There is no direct mode: the v1 client cannot talk to this server without
// the gateway (it refuses initialize).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  McpError,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { textOf, assertToolOK, waitFor } from './helpers.mjs';

const GATEWAY_URL = process.env.MCPGW_URL;
const MODERN_URL = process.env.MCPGW_MODERN_URL || (GATEWAY_URL && `${GATEWAY_URL.replace(/\/+$/, '')}/modern`);
const WIRE_LOG = process.env.MCPGW_MODERN_WIRE_LOG;
const UPSTREAM = 'modern';
const TOOL = (name) => `${UPSTREAM}__${name}`;
const URI = (uri) => uri; // unique on its route: the upstream's own URI
const DOC = 'modern://doc';
const MODERN = '2026-07-28';
const LEGACY = '2025-11-25'; // the v1 SDK's latest
const TEST_TIMEOUT = 20_000;
const CALL_TIMEOUT = { timeout: 15_000 }; // SDK request timeout: a hang fails, it does not stall the run
// How long to wait for something that must NOT arrive. A notification for a
// call travels on that call's stream before its result; updates from the
// listen stream arrive within milliseconds when they arrive at all.
const QUIET_MS = 1_500;

if (!MODERN_URL || !WIRE_LOG) {
  throw new Error(
    'set MCPGW_URL (or MCPGW_MODERN_URL) and MCPGW_MODERN_WIRE_LOG (run.sh does); modern-upstream.test.mjs has no direct mode',
  );
}

const uid = () => `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

// ---------------------------------------------------------------- connections

/**
 * Opens one legacy session on the modern route declaring the given client
 * capabilities, and ends it (DELETE) when test t ends.
 */
async function open(t, capabilities = {}, name = 'mcpgw-interop-modern-upstream') {
  const client = new Client({ name, version: '0.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(MODERN_URL));
  await client.connect(transport, CALL_TIMEOUT);
  client.interopTransport = transport;
  client.interopEnd = async () => {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  };
  t.after(() => client.interopEnd());
  return client;
}

// ---------------------------------------------------------------- the server's wire log

/** Every message modern-server.mjs received ({dir: 'in'}) or sent ({dir: 'out'}), in order. */
function wire() {
  const text = readFileSync(WIRE_LOG, 'utf8');
  // Only complete lines: the server may be appending one right now.
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

const wireMark = () => wire().length;
const wireSince = (mark) => wire().slice(mark);
const inRequests = (entries, method) =>
  entries.filter((e) => e.dir === 'in' && e.msg.method !== undefined && e.msg.id !== undefined && (!method || e.msg.method === method));
const answerTo = (entries, req) => entries.find((e) => e.dir === 'out' && e.msg.method === undefined && e.msg.id === req.msg.id && e.t >= req.t);
const envelopeOf = (msg) => {
  const meta = msg.params?._meta ?? {};
  return {
    protocolVersion: meta['io.modelcontextprotocol/protocolVersion'],
    clientCapabilities: meta['io.modelcontextprotocol/clientCapabilities'],
    logLevel: meta['io.modelcontextprotocol/logLevel'],
  };
};

/**
 * The upstream tools/call requests (and the server's answers) for one
 * downstream call, found by a unique argument value.
 */
function upstreamRounds(entries, tool, argKey, argValue) {
  return inRequests(entries, 'tools/call')
    .filter((e) => e.msg.params?.name === tool && e.msg.params?.arguments?.[argKey] === argValue)
    .map((req) => ({ req: req.msg, res: answerTo(entries, req)?.msg }));
}

// ---------------------------------------------------------------- raw HTTP

/** Parses a text/event-stream response body into its JSON-RPC messages. */
async function* sseMessages(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf = (buf + dec.decode(value, { stream: true })).replace(/\r\n/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) yield JSON.parse(data); // 2025-11-25 priming events carry none
    }
  }
}

/**
 * A legacy session by hand (initialize, initialized; no GET stream, so
 * whatever the gateway sends can only arrive on a POST's own response).
 */
async function rawSession(t, capabilities) {
  const headers = (sid) => ({
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    ...(sid && { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': LEGACY }),
  });
  const init = await fetch(MODERN_URL, {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities, clientInfo: { name: 'modern-raw', version: '0' } },
    }),
    signal: AbortSignal.timeout(CALL_TIMEOUT.timeout),
  });
  assert.equal(init.status, 200, `initialize: HTTP ${init.status}`);
  const sid = init.headers.get('mcp-session-id');
  assert.ok(sid, 'initialize answered without Mcp-Session-Id');
  await init.arrayBuffer();
  t.after(() =>
    fetch(MODERN_URL, { method: 'DELETE', headers: headers(sid), signal: AbortSignal.timeout(5_000) }).catch(() => {}),
  );
  const post = (msg) =>
    fetch(MODERN_URL, {
      method: 'POST',
      headers: headers(sid),
      body: JSON.stringify({ jsonrpc: '2.0', ...msg }),
      signal: AbortSignal.timeout(CALL_TIMEOUT.timeout),
    });
  const initialized = await post({ method: 'notifications/initialized' });
  assert.equal(initialized.status, 202, `notifications/initialized: HTTP ${initialized.status}`);
  return { sid, post };
}

// ---------------------------------------------------------------- helpers

/** The sampling answer a client returns, marked with its own tag. */
const samplingAnswer = (tag) => ({
  model: `interop-model-${tag}`,
  role: 'assistant',
  stopReason: 'endTurn',
  content: { type: 'text', text: `answer from client ${tag}` },
});

// ---------------------------------------------------------------- tests

test('the gateway speaks 2026-07-28 to the modern upstream, never initialize', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { sampling: {} }, 'modern-revision');
  // The client side is a legacy session.
  assert.equal(c.interopTransport.protocolVersion, LEGACY, 'the v1 client did not negotiate 2025-11-25 with the gateway');
  assert.ok(c.interopTransport.sessionId, 'the gateway issued no Mcp-Session-Id: not a legacy session');

  const mark = wireMark();
  const r = await c.callTool({ name: TOOL('envelope'), arguments: {} }, undefined, CALL_TIMEOUT);
  assertToolOK(r, 'envelope');
  const env = JSON.parse(textOf(r));
  t.diagnostic(`envelope the upstream saw: ${textOf(r)}`);
  // What the upstream itself saw for this call: the 2026-07-28 envelope.
  assert.equal(env.protocolVersion, MODERN);

  const all = wire();
  const since = all.slice(mark);
  const calls = inRequests(since, 'tools/call').filter((e) => e.msg.params?.name === 'envelope');
  assert.equal(calls.length, 1, `expected one upstream tools/call for envelope, got ${calls.length}`);

  // Over the whole life of the upstream connection so far.
  const requests = inRequests(all);
  const methods = [...new Set(requests.map((e) => e.msg.method))];
  t.diagnostic(`methods the upstream received: ${methods.join(', ')}`);
  assert.ok(!methods.includes('initialize'), 'the gateway sent initialize to a protocol: "2026" upstream');
  assert.equal(requests[0]?.msg.method, 'server/discover', `the first request was ${requests[0]?.msg.method}, not server/discover`);
  const discovered = answerTo(all, requests[0])?.msg;
  assert.deepEqual(discovered?.result?.supportedVersions, [MODERN], `server/discover answer: ${JSON.stringify(discovered)}`);
  for (const e of requests) {
    assert.equal(
      envelopeOf(e.msg).protocolVersion,
      MODERN,
      `upstream request ${e.msg.method} without the 2026-07-28 envelope: ${JSON.stringify(e.msg)}`,
    );
  }
  // The server refuses anything else, so every answer so far is a result.
  const refused = all.filter((e) => e.dir === 'out' && e.msg.error?.code === -32022);
  assert.deepEqual(refused, [], 'the server refused a request as an unsupported revision');
});

test('each upstream request carries the calling session\'s own client capabilities', { timeout: TEST_TIMEOUT }, async (t) => {
  // A 2026-07-28 server judges every request by the clientCapabilities in its
  // _meta (the SDK v2 server answers -32021 for an input request the caller
  // cannot take; a tool may fall back when sampling is not declared). This is
  // why config validation refuses exact_capabilities with protocol: "2026"
  // ("every request carries its caller's capabilities").
  const cases = [
    { name: 'modern-caps-elicitation', capabilities: { elicitation: { form: {} } } },
    { name: 'modern-caps-none', capabilities: {} },
  ];
  for (const { name, capabilities } of cases) {
    const c = await open(t, capabilities, name);
    const r = await c.callTool({ name: TOOL('envelope'), arguments: {} }, undefined, CALL_TIMEOUT);
    assertToolOK(r, 'envelope');
    const env = JSON.parse(textOf(r));
    t.diagnostic(`${name} declared ${JSON.stringify(capabilities)}; the upstream saw ${JSON.stringify(env.clientCapabilities)}`);
    // A legacy caller is declared to the 2026 upstream with its own
    // capabilities, as its initialize would have (once a gateway bug: it
    // declared its own full set for everyone).
    assert.deepEqual(env.clientCapabilities, capabilities, 'the upstream did not see the calling session\'s own capabilities');
  }
});

test('tools/list shows the modern tools; echo', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const { tools } = await c.listTools({}, CALL_TIMEOUT);
  const names = tools.map((x) => x.name).sort();
  t.diagnostic(`tools: ${names.join(', ')}`);
  assert.deepEqual(
    names,
    ['ask_elicitation', 'ask_roots', 'ask_sampling', 'echo', 'envelope', 'log', 'touch'].map(TOOL).sort(),
  );
  const echo = tools.find((x) => x.name === TOOL('echo'));
  assert.equal(echo.description, 'Returns its text');
  assert.deepEqual(echo.inputSchema.required, ['text']);

  const text = `modern echo ${uid()} ünïcödé ✓ "quoted" \\ back`;
  const r = await c.callTool({ name: TOOL('echo'), arguments: { text } }, undefined, CALL_TIMEOUT);
  assertToolOK(r, 'echo');
  assert.deepEqual(r.content, [{ type: 'text', text }]);
  assert.equal(r.resultType, undefined, 'resultType (2026-07-28 only) reached a legacy client');
});

test('results reach the legacy client without the upstream\'s per-hop identity in _meta', { timeout: TEST_TIMEOUT }, async (t) => {
  // A 2026-07-28 server stamps _meta["io.modelcontextprotocol/serverInfo"]
  // (its own identity, a per-hop key of the 2026 revision) on every result.
  // For its 2026 clients the gateway replaces it with its own
  // (router/stateless.go: "The client's server is the gateway"); a legacy
  // session's server is the gateway just the same (initialize said so).
  const c = await open(t, {}, 'modern-identity');
  const gateway = c.getServerVersion();
  const key = 'io.modelcontextprotocol/serverInfo';
  const results = {
    'tools/list': await c.listTools({}, CALL_TIMEOUT),
    'tools/call': await c.callTool({ name: TOOL('echo'), arguments: { text: 'who are you' } }, undefined, CALL_TIMEOUT),
    'resources/list': await c.listResources({}, CALL_TIMEOUT),
    'resources/read': await c.readResource({ uri: URI(DOC) }, CALL_TIMEOUT),
    'prompts/get': await c.getPrompt({ name: TOOL('greet'), arguments: { who: 'x' } }, CALL_TIMEOUT),
  };
  const leaked = Object.entries(results)
    .filter(([, r]) => r._meta?.[key] !== undefined && JSON.stringify(r._meta[key]) !== JSON.stringify(gateway))
    .map(([m, r]) => `${m}: ${JSON.stringify(r._meta[key])}`);
  t.diagnostic(`initialize serverInfo: ${JSON.stringify(gateway)}; upstream identity in: ${leaked.join('; ') || 'none'}`);
  // The session's server is the gateway (named at initialize): an
  // upstream's per-hop identity must not reach it (once a gateway bug).
  assert.deepEqual(leaked, [], 'the upstream\'s identity reached a legacy session in result _meta');
});

test('input_required sampling: the legacy client samples, the tool gets its answer', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { sampling: {} }, 'modern-sampling');
  const seen = [];
  c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.push(req.params);
    return samplingAnswer('S');
  });

  const prompt = `modern sampling ${uid()} ✓`;
  const mark = wireMark();
  const r = await c.callTool({ name: TOOL('ask_sampling'), arguments: { prompt } }, undefined, CALL_TIMEOUT);
  t.diagnostic(textOf(r));
  assertToolOK(r, 'ask_sampling');

  // The upstream's embedded request reached this client once, intact.
  assert.equal(seen.length, 1, `sampling handler called ${seen.length} times: ${JSON.stringify(seen)}`);
  assert.deepEqual(seen[0].messages, [{ role: 'user', content: { type: 'text', text: prompt } }]);
  assert.equal(seen[0].systemPrompt, 'You are the modern interop server.');
  assert.equal(seen[0].maxTokens, 64);

  // Its answer went back: the tool reports it.
  assert.equal(textOf(r), `sampled: ${samplingAnswer('S').content.text}`);

  // On the upstream's wire: input_required, then one retry carrying the
  // client's answer as inputResponses and the server's requestState as sent.
  const rounds = upstreamRounds(wireSince(mark), 'ask_sampling', 'prompt', prompt);
  t.diagnostic(`upstream rounds: ${JSON.stringify(rounds)}`);
  assert.equal(rounds.length, 2, `expected 2 upstream tools/call rounds, got ${rounds.length}`);
  const [first, retry] = rounds;
  assert.equal(first.req.params.inputResponses, undefined);
  assert.equal(first.res?.result?.resultType, 'input_required');
  assert.equal(first.res.result.inputRequests?.sample?.method, 'sampling/createMessage');
  const state = first.res.result.requestState;
  assert.equal(typeof state, 'string');
  assert.equal(retry.req.params.requestState, state, 'the gateway did not echo the upstream\'s requestState untouched');
  assert.deepEqual(Object.keys(retry.req.params.inputResponses ?? {}), ['sample']);
  const answered = retry.req.params.inputResponses.sample;
  for (const [k, v] of Object.entries(samplingAnswer('S'))) {
    assert.deepEqual(answered[k], v, `inputResponses.sample.${k} differs from the client's answer`);
  }
  assert.equal(retry.res?.result?.resultType, 'complete');
});

test('the sampling request travels on the call\'s own POST stream (raw HTTP, no GET stream)', { timeout: TEST_TIMEOUT }, async (t) => {
  const { post } = await rawSession(t, { sampling: {} });
  const prompt = `raw sampling ${uid()}`;
  const res = await post({ id: 2, method: 'tools/call', params: { name: TOOL('ask_sampling'), arguments: { prompt } } });
  assert.equal(res.status, 200, `tools/call: HTTP ${res.status}`);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/, 'the call was not answered with a stream, so no request could travel on it');
  const seen = [];
  let result;
  for await (const msg of sseMessages(res)) {
    seen.push(msg);
    if (msg.method === 'sampling/createMessage') {
      const answered = await post({ id: msg.id, result: samplingAnswer('raw') });
      assert.equal(answered.status, 202, `posting the sampling answer: HTTP ${answered.status}`);
      await answered.arrayBuffer();
    } else if (msg.id === 2) {
      result = msg;
      break;
    }
  }
  t.diagnostic(`on the call's stream: ${JSON.stringify(seen)}`);
  const asks = seen.filter((m) => m.method === 'sampling/createMessage');
  assert.equal(asks.length, 1, 'expected exactly one sampling/createMessage on the call\'s stream');
  assert.deepEqual(asks[0].params.messages, [{ role: 'user', content: { type: 'text', text: prompt } }]);
  assert.ok(result?.result, `no result for the call: ${JSON.stringify(result)}`);
  assert.equal(textOf(result.result), `sampled: ${samplingAnswer('raw').content.text}`);
  assert.equal(result.result.resultType, undefined, 'resultType (2026-07-28 only) reached a legacy client');
});

test('input_required elicitation: the legacy client is asked, the tool greets its answer', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { elicitation: { form: {} } }, 'modern-elicitation');
  const seen = [];
  const name = `Ada ${uid()}`;
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen.push(req.params);
    return { action: 'accept', content: { name } };
  });

  const r = await c.callTool({ name: TOOL('ask_elicitation'), arguments: {} }, undefined, CALL_TIMEOUT);
  t.diagnostic(textOf(r));
  assertToolOK(r, 'ask_elicitation');
  assert.equal(seen.length, 1, `elicitation handler called ${seen.length} times`);
  const p = seen[0];
  assert.equal(p.message, 'What is your name?');
  assert.equal(p.mode ?? 'form', 'form');
  assert.deepEqual(p.requestedSchema, {
    type: 'object',
    properties: { name: { type: 'string', title: 'Name', description: 'Your name' } },
    required: ['name'],
  });
  assert.equal(textOf(r), `hello ${name}`);

  // A decline reaches the upstream as a decline.
  c.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));
  const d = await c.callTool({ name: TOOL('ask_elicitation'), arguments: {} }, undefined, CALL_TIMEOUT);
  assertToolOK(d, 'ask_elicitation (declined)');
  assert.equal(textOf(d), 'elicitation decline');
});

test('input_required roots/list: forward_roots relays it to the legacy client', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { roots: { listChanged: true } }, 'modern-roots');
  const roots = [
    { uri: `file:///interop/modern/${uid()}`, name: 'first' },
    { uri: 'file:///interop/modern/second', name: 'second' },
  ];
  let asked = 0;
  c.setRequestHandler(ListRootsRequestSchema, async () => {
    asked++;
    return { roots };
  });
  const r = await c.callTool({ name: TOOL('ask_roots'), arguments: {} }, undefined, CALL_TIMEOUT);
  t.diagnostic(textOf(r));
  assertToolOK(r, 'ask_roots');
  assert.equal(asked, 1, `roots/list handler called ${asked} times`);
  assert.equal(textOf(r), roots.map((x) => x.uri).join(', '));
});

test('a session without sampling gets an error for ask_sampling, not a hang', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, {}, 'modern-no-sampling');
  const start = Date.now();
  let outcome;
  try {
    const r = await c.callTool({ name: TOOL('ask_sampling'), arguments: { prompt: `nobody ${uid()}` } }, undefined, CALL_TIMEOUT);
    outcome = { kind: 'result', r };
  } catch (err) {
    outcome = { kind: 'error', err };
  }
  const took = Date.now() - start;
  t.diagnostic(`after ${took} ms: ${outcome.kind === 'error' ? `${outcome.err.code} ${outcome.err.message}` : JSON.stringify(outcome.r)}`);
  if (outcome.kind === 'error') {
    assert.ok(outcome.err instanceof McpError, `expected McpError, got ${outcome.err?.stack ?? outcome.err}`);
    assert.ok(!/timed out/i.test(outcome.err.message), `the call hung: ${outcome.err.message}`);
    assert.match(`${outcome.err.message} ${JSON.stringify(outcome.err.data ?? '')}`, /sampling/i);
  } else {
    assert.equal(outcome.r.isError, true, `expected an error, got ${JSON.stringify(outcome.r)}`);
    assert.match(textOf(outcome.r), /sampling/i);
  }
  assert.ok(took < 10_000, `the refusal took ${took} ms`);
});

test('resources/read and prompts/get', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const { resources } = await c.listResources({}, CALL_TIMEOUT);
  t.diagnostic(`resources: ${JSON.stringify(resources)}`);
  const doc = resources.find((x) => x.uri === URI(DOC));
  assert.ok(doc, `no ${URI(DOC)} in ${JSON.stringify(resources.map((x) => x.uri))}`);
  assert.equal(doc.name, 'doc');
  assert.equal(doc.mimeType, 'text/plain');

  const read = await c.readResource({ uri: URI(DOC) }, CALL_TIMEOUT);
  assert.deepEqual(read.contents, [{ uri: URI(DOC), mimeType: 'text/plain', text: 'the doc' }]);

  const { prompts } = await c.listPrompts({}, CALL_TIMEOUT);
  const greet = prompts.find((x) => x.name === TOOL('greet'));
  assert.ok(greet, `no ${TOOL('greet')} in ${JSON.stringify(prompts.map((x) => x.name))}`);
  assert.deepEqual(greet.arguments, [{ name: 'who', description: 'Whom to greet', required: true }]);
  const who = `Grace ${uid()}`;
  const got = await c.getPrompt({ name: TOOL('greet'), arguments: { who } }, CALL_TIMEOUT);
  assert.deepEqual(got.messages, [{ role: 'user', content: { type: 'text', text: `Please greet ${who}.` } }]);
});

test('resources/subscribe becomes subscriptions/listen: touch notifies the subscriber, not after unsubscribe', { timeout: 30_000 }, async (t) => {
  const sub = await open(t, {}, 'modern-subscriber');
  const other = await open(t, {}, 'modern-bystander');
  const got = [];
  const otherGot = [];
  sub.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => got.push(n.params));
  other.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => otherGot.push(n.params));
  const touch = async (uri) => {
    const r = await sub.callTool({ name: TOOL('touch'), arguments: { uri } }, undefined, CALL_TIMEOUT);
    assertToolOK(r, `touch ${uri}`);
  };

  const mark = wireMark();
  await sub.subscribeResource({ uri: URI(DOC) }, CALL_TIMEOUT);
  // The upstream now has a listen stream naming the URI (upstream naming).
  const listens = inRequests(wireSince(mark), 'subscriptions/listen');
  t.diagnostic(`listen requests after subscribe: ${JSON.stringify(listens.map((e) => e.msg.params.notifications))}`);
  assert.ok(
    listens.some((e) => e.msg.params?.notifications?.resourceSubscriptions?.includes(DOC)),
    `no subscriptions/listen naming ${DOC} reached the upstream`,
  );

  await touch(DOC);
  await waitFor(() => got.length >= 1, 5_000, `notifications/resources/updated for ${URI(DOC)}`);
  t.diagnostic(`updates: ${JSON.stringify(got)}`);
  assert.equal(got[0].uri, URI(DOC), 'update not in gateway naming');
  assert.equal(got[0]._meta?.['io.modelcontextprotocol/subscriptionId'], undefined, 'the upstream\'s subscriptionId reached a legacy client');

  // A URI nobody subscribed to: nothing, to anyone.
  await touch('modern://elsewhere');
  await sleep(QUIET_MS);
  assert.deepEqual(got.map((g) => g.uri), [URI(DOC)], 'an update for a URI the session did not subscribe to arrived');
  assert.deepEqual(otherGot, [], 'a session that did not subscribe received resource updates');

  await sub.unsubscribeResource({ uri: URI(DOC) }, CALL_TIMEOUT);
  const n = got.length;
  await touch(DOC);
  await sleep(QUIET_MS);
  assert.equal(got.length, n, `updates kept arriving after unsubscribe: ${JSON.stringify(got.slice(n))}`);
  assert.deepEqual(otherGot, [], 'a session that did not subscribe received resource updates');
  const after = wireSince(mark);
  t.diagnostic(
    `upstream listen traffic: ${JSON.stringify(
      after
        .filter((e) => e.msg.method === 'subscriptions/listen' || e.msg.method === 'notifications/cancelled' || e.msg.method === 'notifications/subscriptions/acknowledged')
        .map((e) => [e.dir, e.msg.method, e.msg.id ?? e.msg.params?.requestId ?? e.msg.params?._meta?.['io.modelcontextprotocol/subscriptionId'], e.msg.params?.notifications]),
    )}`,
  );
});

test('subscriptions are shared across sessions and released when a session ends', { timeout: 30_000 }, async (t) => {
  const [a, b, toucher] = await Promise.all([open(t, {}, 'modern-sub-A'), open(t, {}, 'modern-sub-B'), open(t, {}, 'modern-toucher')]);
  const got = { A: [], B: [] };
  a.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => got.A.push(n.params.uri));
  b.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => got.B.push(n.params.uri));
  const touch = async () => {
    const r = await toucher.callTool({ name: TOOL('touch'), arguments: { uri: DOC } }, undefined, CALL_TIMEOUT);
    assertToolOK(r, 'touch');
  };
  const listenNames = (entries) =>
    inRequests(entries, 'subscriptions/listen').map((e) => e.msg.params?.notifications?.resourceSubscriptions ?? []);

  await a.subscribeResource({ uri: URI(DOC) }, CALL_TIMEOUT);
  await b.subscribeResource({ uri: URI(DOC) }, CALL_TIMEOUT);
  await touch();
  await waitFor(() => got.A.length >= 1 && got.B.length >= 1, 5_000, 'the update at both subscribers');
  assert.deepEqual(got, { A: [URI(DOC)], B: [URI(DOC)] });

  // A lets go; B still holds the URI, so the upstream keeps it.
  await a.unsubscribeResource({ uri: URI(DOC) }, CALL_TIMEOUT);
  await touch();
  await waitFor(() => got.B.length >= 2, 5_000, 'the second update at B');
  await sleep(200);
  assert.deepEqual(got, { A: [URI(DOC)], B: [URI(DOC), URI(DOC)] }, 'after A unsubscribed');

  // B's session ends without unsubscribing: the gateway releases the URI
  // upstream (a listen stream that no longer names it replaces the old one).
  const mark = wireMark();
  await b.interopEnd();
  await waitFor(
    () => listenNames(wireSince(mark)).some((names) => !names.includes(DOC)),
    5_000,
    `a subscriptions/listen without ${DOC} after the last subscriber's session ended`,
  );
  t.diagnostic(`listen sets after B ended: ${JSON.stringify(listenNames(wireSince(mark)))}`);
  await touch();
  await sleep(QUIET_MS);
  assert.deepEqual(got, { A: [URI(DOC)], B: [URI(DOC), URI(DOC)] }, 'updates after every subscriber let go');
});

test('logging/setLevel becomes the per-request _meta log level: info delivered at "info", not at "error"', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, {}, 'modern-logging');
  const bystander = await open(t, {}, 'modern-logging-bystander');
  const logs = [];
  const bystanderLogs = [];
  c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
  bystander.setNotificationHandler(LoggingMessageNotificationSchema, (n) => bystanderLogs.push(n.params));
  await bystander.setLoggingLevel('debug', CALL_TIMEOUT);

  await c.setLoggingLevel('info', CALL_TIMEOUT);
  const infoText = `modern log at info ${uid()}`;
  let mark = wireMark();
  const r1 = await c.callTool({ name: TOOL('log'), arguments: { text: infoText } }, undefined, CALL_TIMEOUT);
  assertToolOK(r1, 'log');
  assert.equal(textOf(r1), 'logged');
  const [call1] = upstreamRounds(wireSince(mark), 'log', 'text', infoText);
  t.diagnostic(`upstream envelope at "info": ${JSON.stringify(envelopeOf(call1?.req ?? {}))}`);
  assert.equal(envelopeOf(call1.req).logLevel, 'info', 'the upstream request did not carry the session\'s log level in _meta');
  await waitFor(() => logs.some((l) => l.data === infoText), 5_000, `the info log message ${JSON.stringify(infoText)}`);
  const msg = logs.find((l) => l.data === infoText);
  assert.equal(msg.level, 'info');
  assert.equal(msg.logger, 'modern-server');
  assert.equal(logs.length, 1, `expected one log message, got ${JSON.stringify(logs)}`);

  await c.setLoggingLevel('error', CALL_TIMEOUT);
  const errorText = `modern log at error ${uid()}`;
  mark = wireMark();
  const r2 = await c.callTool({ name: TOOL('log'), arguments: { text: errorText } }, undefined, CALL_TIMEOUT);
  assertToolOK(r2, 'log');
  const [call2] = upstreamRounds(wireSince(mark), 'log', 'text', errorText);
  t.diagnostic(`upstream envelope at "error": ${JSON.stringify(envelopeOf(call2?.req ?? {}))}`);
  await sleep(QUIET_MS);
  assert.deepEqual(
    logs.filter((l) => l.data === errorText),
    [],
    'an info message reached a session whose level is "error"',
  );
  // The other session (level debug) made no call: nothing of c's reaches it.
  assert.deepEqual(bystanderLogs, [], 'another session received this session\'s call\'s log messages');
});

test('two legacy sessions sampling at once on the one stdio upstream each get only their own request', { timeout: 30_000 }, async (t) => {
  const [a, b] = await Promise.all([open(t, { sampling: {} }, 'modern-A'), open(t, { sampling: {} }, 'modern-B')]);
  const seen = { A: [], B: [] };
  const inHandler = new Set();
  let overlapped = false;
  const handler = (tag) => async (req) => {
    seen[tag].push(req.params.messages?.[0]?.content?.text);
    inHandler.add(tag);
    // Hold the answer until the other session's request is out too (bounded),
    // so both input_required rounds are open at the same time.
    await waitFor(() => inHandler.size === 2, 5_000, 'both sampling requests to be outstanding').then(
      () => (overlapped = true),
      () => {},
    );
    return samplingAnswer(tag);
  };
  a.setRequestHandler(CreateMessageRequestSchema, handler('A'));
  b.setRequestHandler(CreateMessageRequestSchema, handler('B'));

  const promptA = `from A ${uid()}`;
  const promptB = `from B ${uid()}`;
  const [ra, rb] = await Promise.all([
    a.callTool({ name: TOOL('ask_sampling'), arguments: { prompt: promptA } }, undefined, CALL_TIMEOUT),
    b.callTool({ name: TOOL('ask_sampling'), arguments: { prompt: promptB } }, undefined, CALL_TIMEOUT),
  ]);
  t.diagnostic(`A: ${textOf(ra)} | B: ${textOf(rb)} | overlapped: ${overlapped}`);
  assertToolOK(ra, 'A ask_sampling');
  assertToolOK(rb, 'B ask_sampling');
  assert.deepEqual(seen.A, [promptA], 'A\'s sampling handler saw requests other than its own');
  assert.deepEqual(seen.B, [promptB], 'B\'s sampling handler saw requests other than its own');
  assert.equal(textOf(ra), `sampled: ${samplingAnswer('A').content.text}`);
  assert.equal(textOf(rb), `sampled: ${samplingAnswer('B').content.text}`);
  assert.ok(overlapped, 'the two sampling requests were never outstanding at the same time');
});
