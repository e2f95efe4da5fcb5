// Fidelity test: what an upstream sends *during* a call, or outside any call,
// must reach the right downstream client through mcpgw, intact:
//
//   - progress notifications of a long-running tool call, streamed as they happen
//   - sampling/createMessage relayed upstream -> gateway -> client, answer back
//   - elicitation/create (form mode) relayed the same way
//   - notifications/resources/updated for a subscribed resource, to the
//     subscribing session only
//   - a session that did not declare sampling gets an error (never a hang),
//     and another session's sampling handler is never asked in its place
//
// The upstream is @modelcontextprotocol/server-everything (upstream name
// "everything": tools "everything__<name>"; its resource URIs are unique on
// the route, so they are everything's own).
//
// Modes (same env vars as client.test.mjs):
//   MCPGW_URL=http://127.0.0.1:PORT/mcp node --test test/interop/fidelity.test.mjs
//     Gateway mode (what run.sh does): one Streamable HTTP session per client.
//   INTEROP_DIRECT=1 node --test test/interop/fidelity.test.mjs
//     Direct mode: each "session" is server-everything spawned over stdio
//     behind a small facade that applies the gateway's naming, so the test
//     logic and the pinned server are checked without the gateway.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  McpError,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { textOf, assertToolOK, waitFor } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DIRECT = process.env.INTEROP_DIRECT === '1';
const GATEWAY_URL = process.env.MCPGW_URL;
const UPSTREAM = 'everything';
const TOOL = (name) => `${UPSTREAM}__${name}`;
const TEST_TIMEOUT = 20_000;
const CALL_TIMEOUT = { timeout: 15_000 }; // SDK request timeout: a hang fails, it does not stall the run

// server-everything's simulated resource updates (resources/subscriptions.js):
// one right away when toggled on, then every 5 s.
const UPDATE_INTERVAL_MS = 5_000;

if (!DIRECT && !GATEWAY_URL) {
  throw new Error('set MCPGW_URL (e.g. http://127.0.0.1:18080/mcp) or INTEROP_DIRECT=1');
}

const uid = () => `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

// ---------------------------------------------------------------- connections

/**
 * Opens one downstream session declaring the given client capabilities, and
 * closes it when test t ends.
 */
async function open(t, capabilities = {}, name = 'mcpgw-interop-fidelity') {
  const client = new Client({ name, version: '0.0.0' }, { capabilities });
  const transport = DIRECT
    ? new StdioClientTransport({
        command: process.execPath,
        args: [path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js'), 'stdio'],
        stderr: 'ignore',
      })
    : new StreamableHTTPClientTransport(new URL(GATEWAY_URL));
  await client.connect(transport);
  const c = DIRECT ? new DirectSession(client) : client;
  c.interopTap = tap(transport);
  t.after(() => c.close().catch(() => {}));
  return c;
}

/**
 * tap records every message the transport delivers to the SDK, before the SDK
 * sees it ({in: true}), and every message the SDK sends ({in: false}). The SDK
 * handles notifications a microtask later than responses, so onprogress can
 * miss a progress notification that arrives together with the result; the
 * tap sees the wire order.
 */
function tap(transport) {
  const seen = [];
  const deliver = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    seen.push({ in: true, at: Date.now(), msg });
    deliver?.(msg, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    seen.push({ in: false, at: Date.now(), msg });
    return send(msg, opts);
  };
  return seen;
}

/**
 * DirectSession presents one directly connected server-everything the way the
 * gateway names it, for the subset of the Client API these tests use.
 */
class DirectSession {
  constructor(client) {
    this.client = client;
  }

  static strip(prefixed, sep) {
    const p = UPSTREAM + sep;
    if (!prefixed.startsWith(p)) throw new McpError(-32602, `unknown upstream in ${prefixed}`);
    return prefixed.slice(p.length);
  }

  callTool(params, schema, options) {
    return this.client.callTool({ ...params, name: DirectSession.strip(params.name, '__') }, schema, options);
  }

  // Resource URIs unique on the route are the upstream's own.
  listResources(params, options) {
    return this.client.listResources(params, options);
  }

  subscribeResource(params, options) {
    return this.client.subscribeResource(params, options);
  }

  unsubscribeResource(params, options) {
    return this.client.unsubscribeResource(params, options);
  }

  setRequestHandler(schema, handler) {
    return this.client.setRequestHandler(schema, handler);
  }

  setNotificationHandler(schema, handler) {
    return this.client.setNotificationHandler(schema, handler);
  }

  close() {
    return this.client.close();
  }
}

// ---------------------------------------------------------------- helpers

/**
 * Runs a call that must fail, either as a JSON-RPC error or as an isError
 * tool result, and returns the error text. Fails if it succeeds.
 */
async function expectToolError(p, what) {
  let r;
  try {
    r = await p;
  } catch (err) {
    assert.ok(err instanceof McpError, `${what}: expected McpError, got ${err?.stack ?? err}`);
    assert.ok(!/timed out/i.test(err.message), `${what}: the call hung until the client's timeout: ${err.message}`);
    return { kind: 'error', code: err.code, text: err.message };
  }
  assert.equal(r.isError, true, `${what}: expected an error, got a result: ${JSON.stringify(r)}`);
  return { kind: 'isError', text: textOf(r) };
}

/** The sampling answer a client returns, marked with its own tag. */
const samplingAnswer = (tag) => ({
  model: `interop-fixed-model-${tag}`,
  role: 'assistant',
  stopReason: 'endTurn',
  content: { type: 'text', text: `fixed sampling answer from client ${tag}` },
});

// ---------------------------------------------------------------- tests

test('long-running operation streams progress notifications, then the result', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const duration = 2;
  const steps = 4;
  const events = []; // what the SDK hands to onprogress
  const start = Date.now();
  const tapFrom = c.interopTap.length;
  const r = await c.callTool(
    { name: TOOL('trigger-long-running-operation'), arguments: { duration, steps } },
    undefined,
    { ...CALL_TIMEOUT, onprogress: (p) => events.push({ at: Date.now() - start, ...p }) },
  );
  const resultAt = Date.now() - start;
  assertToolOK(r, 'trigger-long-running-operation');
  assert.equal(textOf(r), `Long running operation completed. Duration: ${duration} seconds, Steps: ${steps}.`);

  // On the wire: one notification per step, in order, with the upstream's
  // values and the progress token this client sent (the gateway swaps in its
  // own upstream and must restore it), all before the result.
  const wire = c.interopTap.slice(tapFrom);
  const sent = wire.find((w) => !w.in && w.msg.method === 'tools/call');
  const token = sent?.msg.params?._meta?.progressToken;
  assert.ok(token !== undefined, `the SDK sent no progress token: ${JSON.stringify(sent?.msg)}`);
  const progress = wire
    .filter((w) => w.in && w.msg.method === 'notifications/progress')
    .map((w) => ({ at: w.at - start, ...w.msg.params }));
  const resultIdx = wire.findIndex((w) => w.in && w.msg.id === sent.msg.id && w.msg.result);
  t.diagnostic(`wire progress: ${JSON.stringify(progress)}; onprogress: ${JSON.stringify(events)}; result at ${resultAt} ms`);
  assert.deepEqual(
    progress.map((p) => [p.progress, p.total]),
    [[1, steps], [2, steps], [3, steps], [4, steps]],
    `expected progress 1..${steps} of ${steps}, got ${JSON.stringify(progress)}`,
  );
  for (const p of progress) assert.deepEqual(p.progressToken, token, 'progress token differs from the one the client sent');
  const lastProgressIdx = wire.findLastIndex((w) => w.in && w.msg.method === 'notifications/progress');
  assert.ok(resultIdx > lastProgressIdx, 'a progress notification arrived after the result');

  // Through the SDK: onprogress fired with increasing progress. The last one
  // may be lost to the SDK's notification/response ordering (see tap), not to
  // the gateway.
  assert.ok(events.length >= steps - 1, `onprogress called ${events.length} times: ${JSON.stringify(events)}`);
  assert.deepEqual(
    events.map((e) => e.progress),
    progress.slice(0, events.length).map((p) => p.progress),
    'onprogress values differ from the wire',
  );
  for (let i = 1; i < events.length; i++) {
    assert.ok(events[i].progress > events[i - 1].progress, `progress not increasing: ${JSON.stringify(events)}`);
  }

  // Streamed as they happen, not held back until the result: the first step
  // ends at ~0.5 s, the result at ~2 s.
  assert.ok(
    resultAt - progress[0].at >= 800,
    `first progress arrived at ${progress[0].at} ms, only ${resultAt - progress[0].at} ms before the result at ${resultAt} ms: progress was buffered`,
  );
});

test('sampling/createMessage is relayed to the calling client and its answer back', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { sampling: {} });
  const seen = [];
  c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.push(req.params);
    return samplingAnswer('A');
  });

  const prompt = `fidelity sampling ${uid()} ünïcödé ✓`;
  const r = await c.callTool(
    { name: TOOL('trigger-sampling-request'), arguments: { prompt, maxTokens: 33 } },
    undefined,
    CALL_TIMEOUT,
  );
  t.diagnostic(textOf(r));
  assertToolOK(r, 'trigger-sampling-request');

  // The request reached this client once, with the upstream's params intact.
  assert.equal(seen.length, 1, `sampling handler called ${seen.length} times: ${JSON.stringify(seen)}`);
  const p = seen[0];
  assert.equal(p.maxTokens, 33);
  assert.equal(p.systemPrompt, 'You are a helpful test server.');
  assert.equal(p.temperature, 0.7);
  assert.equal(p.messages?.length, 1);
  assert.equal(p.messages[0].role, 'user');
  assert.deepEqual(p.messages[0].content, { type: 'text', text: `Resource trigger-sampling-request context: ${prompt}` });

  // The client's answer went back upstream: the tool reports it verbatim.
  const text = textOf(r);
  assert.match(text, /^LLM sampling result: /);
  const reported = JSON.parse(text.slice(text.indexOf('{')));
  assert.deepEqual(reported, samplingAnswer('A'));
});

test('elicitation/create (form) is relayed and the accepted content reaches the tool', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t, { elicitation: { form: {} } });
  const seen = [];
  const content = {
    name: `Ada Lovelace ${uid()}`,
    check: true,
    email: 'ada@example.com',
    birthdate: '1815-12-10',
    integer: 7,
    number: 2.5,
    untitledSingleSelectEnum: 'Joey',
  };
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen.push(req.params);
    return { action: 'accept', content };
  });

  const r = await c.callTool({ name: TOOL('trigger-elicitation-request'), arguments: {} }, undefined, CALL_TIMEOUT);
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
  assert.equal(schema.properties.integer.default, 42);
  assert.equal(schema.properties.email.format, 'email');
  assert.deepEqual(schema.properties.legacyTitledEnum.enumNames, ['Cats', 'Dogs', 'Birds', 'Fish', 'Reptiles']);

  const text = textOf(r);
  assert.match(text, /User provided the requested information!/);
  for (const line of [
    `- Name: ${content.name}`,
    '- Agreed to terms: true',
    '- Email: ada@example.com',
    '- Birthdate: 1815-12-10',
    '- Favorite Integer: 7',
    '- Favorite Number: 2.5',
  ]) {
    assert.ok(text.includes(line), `tool result lacks ${JSON.stringify(line)}: ${text}`);
  }
  const raw = JSON.parse(text.slice(text.indexOf('Raw result: ') + 'Raw result: '.length));
  assert.deepEqual(raw, { action: 'accept', content });
});

test('resources/subscribe: updates reach the subscribed session only, and stop after unsubscribe', { timeout: 40_000 }, async (t) => {
  const sub = await open(t, {}, 'fidelity-subscriber');
  const other = await open(t, {}, 'fidelity-bystander');
  const got = [];
  const otherGot = [];
  sub.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => got.push({ at: Date.now(), uri: n.params.uri }));
  other.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => otherGot.push(n.params.uri));

  const { resources } = await sub.listResources({}, CALL_TIMEOUT);
  const res =
    resources.find((r) => r.uri.startsWith('demo://resource/static/document/')) ??
    resources.find((r) => r.uri.startsWith('demo://'));
  assert.ok(res, `no demo:// resource of ${UPSTREAM} in ${JSON.stringify(resources.map((r) => r.uri))}`);
  const uri = res.uri;
  t.diagnostic(`subscribing to ${uri}`);
  await sub.subscribeResource({ uri }, CALL_TIMEOUT);

  // server-everything only sends updates once toggled on, for the upstream
  // session (the gateway's one, shared: so it is toggled on exactly once
  // here and off again at the end, while sub is still open: t.after hooks
  // run in registration order, so one registered here would run after
  // open()'s close and fail).
  const toggle = async () => {
    const r = await sub.callTool({ name: TOOL('toggle-subscriber-updates'), arguments: {} }, undefined, CALL_TIMEOUT);
    assertToolOK(r, 'toggle-subscriber-updates');
    return textOf(r);
  };
  let state = await toggle();
  if (state.startsWith('Stopped')) state = await toggle(); // left on by an earlier run
  assert.match(state, /^Started/, `toggle-subscriber-updates: ${state}`);
  let off;
  try {
    // One update right away, then one every 5 s.
    await waitFor(() => got.length >= 1, UPDATE_INTERVAL_MS + 5_000, `a first notifications/resources/updated for ${uri}`);
    await waitFor(() => got.length >= 2, 2 * UPDATE_INTERVAL_MS + 2_000, `a second (periodic) update for ${uri}`);
    t.diagnostic(`updates at +${got.map((g) => g.at - got[0].at).join(', +')} ms`);
    for (const g of got) assert.equal(g.uri, uri, 'update for a URI this session did not subscribe to (or not in gateway naming)');
    assert.deepEqual(otherGot, [], 'a session that did not subscribe received resource updates');

    await sub.unsubscribeResource({ uri }, CALL_TIMEOUT);
    await sleep(200); // an update already in flight may still land
    const n = got.length;
    await sleep(UPDATE_INTERVAL_MS + 1_000);
    assert.equal(got.length, n, `updates kept arriving after unsubscribe: ${JSON.stringify(got.slice(n))}`);
    assert.deepEqual(otherGot, [], 'a session that did not subscribe received resource updates');
  } finally {
    off = await toggle().catch((err) => `toggle off failed: ${err}`);
  }
  assert.match(off, /^Stopped/, `toggling updates off again: ${off}`);
});

test('a session without sampling gets an error, never another session\'s sampling handler', { timeout: 30_000 }, async (t) => {
  // Two sessions at once: A declares sampling, B does not.
  const [a, b] = await Promise.all([open(t, { sampling: {} }, 'fidelity-A'), open(t, {}, 'fidelity-B')]);
  const seenA = [];
  let duringA; // runs inside A's sampling handler (second part)
  a.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seenA.push(req.params.messages?.[0]?.content?.text);
    if (duringA) await duringA();
    return samplingAnswer('A');
  });

  const callB = (prompt) =>
    b.callTool({ name: TOOL('trigger-sampling-request'), arguments: { prompt } }, undefined, CALL_TIMEOUT);

  // 1. B alone: refused quickly, A not asked.
  const promptB1 = `from B, first ${uid()}`;
  let start = Date.now();
  const e1 = await expectToolError(callB(promptB1), 'B calling the sampling tool');
  const took1 = Date.now() - start;
  t.diagnostic(`B alone: ${e1.kind} after ${took1} ms: ${e1.text}`);
  assert.ok(took1 < 10_000, `B's refusal took ${took1} ms`);
  assert.match(e1.text, /sampling/i, `B's error does not mention sampling: ${e1.text}`);
  assert.deepEqual(seenA, [], 'A\'s sampling handler was called for B\'s request');

  // 2. While A's own sampling request is open (A's handler is running), B
  // calls the same tool on the same upstream: B still fails without hanging,
  // A's handler sees only A's request, and A's call completes.
  const promptA = `from A ${uid()}`;
  const promptB2 = `from B, during A ${uid()}`;
  let e2;
  let took2;
  duringA = async () => {
    duringA = undefined;
    const s = Date.now();
    e2 = await expectToolError(callB(promptB2), 'B calling the sampling tool while A samples');
    took2 = Date.now() - s;
  };
  start = Date.now();
  const ra = await a.callTool(
    { name: TOOL('trigger-sampling-request'), arguments: { prompt: promptA } },
    undefined,
    CALL_TIMEOUT,
  );
  t.diagnostic(`B during A: ${e2?.kind} after ${took2} ms: ${e2?.text}`);
  t.diagnostic(`A: ${textOf(ra)}`);
  assert.ok(e2, 'A\'s handler never ran B\'s call');
  assert.ok(took2 < 10_000, `B's refusal took ${took2} ms`);
  assert.deepEqual(
    seenA,
    [`Resource trigger-sampling-request context: ${promptA}`],
    'A\'s sampling handler saw requests other than its own',
  );
  assertToolOK(ra, 'A calling the sampling tool');
  assert.deepEqual(JSON.parse(textOf(ra).slice(textOf(ra).indexOf('{'))), samplingAnswer('A'));
});
