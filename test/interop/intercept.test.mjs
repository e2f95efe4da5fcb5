// Interceptors (docs/interceptors.md) with a real upstream and the official
// TypeScript SDK v1 client. This file starts its own gateway ($MCPGW_BIN,
// which run.sh sets) with its own config, so the interceptors never sit in
// front of the other files' routes. One server-everything child serves three
// routes:
//
//   /mcp/plain   no interceptor matches it
//   /mcp/redact  redact (aws_access_key, email) on results
//   /mcp/guard   deny_match on request arguments
//
// - redact: the same echo call on /mcp/plain and /mcp/redact; the raw
//   JSON-RPC answer from /mcp/redact is the one from /mcp/plain with the
//   secret and the e-mail replaced by "[redacted]", every other byte the same.
// - deny_match: a call whose argument matches is refused with the configured
//   reason, and the gateway's own count of tools/call sent to the upstream
//   (admin /metrics, mcpgw_upstream_call_duration_seconds_count) does not
//   move, while the allowed call that follows moves it by one.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

import { textOf, assertToolOK } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = process.env.MCPGW_BIN;
const CALL_TIMEOUT = { timeout: 15_000 };

// AKIA + 16 upper-case letters and digits: the aws_access_key detector's shape.
const SECRET = 'AKIAIOSFODNN7INTEROP';
const EMAIL = 'alice.interop@example.com';
const DENY_WORD = 'EXFILTRATE-TO-PASTEBIN';
const DENY_REASON = 'exfiltration marker in the arguments';

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

let gw; // { proc, base, admin, dir, log }

before(async () => {
  if (!BIN) return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpgw-intercept-'));
  const port = await freePort();
  let adminPort = await freePort();
  while (adminPort === port) adminPort = await freePort();
  const everything = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
  const config = `listen: 127.0.0.1:${port}
admin:
  listen: 127.0.0.1:${adminPort}
upstreams:
  everything:
    command: [node, ${JSON.stringify(everything)}, stdio]
    required: true
routes:
  - path: /mcp/plain
    upstreams: [everything]
  - path: /mcp/redact
    upstreams: [everything]
  - path: /mcp/guard
    upstreams: [everything]
interceptors:
  - name: redact-secrets
    type: redact
    phase: result
    match: {routes: [/mcp/redact]}
    detectors: [aws_access_key, email]
  - name: no-exfil
    type: deny_match
    phase: request
    match: {routes: [/mcp/guard]}
    patterns: [${JSON.stringify(DENY_WORD)}]
    reason: ${JSON.stringify(DENY_REASON)}
`;
  fs.writeFileSync(path.join(dir, 'gateway.yaml'), config);
  const log = fs.openSync(path.join(dir, 'mcpgw.log'), 'w');
  const proc = spawn(BIN, ['run', '--config', path.join(dir, 'gateway.yaml')], { stdio: ['ignore', log, log] });
  let exited = null;
  proc.on('exit', (code, sig) => (exited = `exited (${code ?? sig})`));
  gw = { proc, base: `http://127.0.0.1:${port}`, admin: `http://127.0.0.1:${adminPort}`, dir, logPath: path.join(dir, 'mcpgw.log') };
  // /readyz is 503 until the required upstream is connected.
  let ready = false;
  const poll = async () => {
    try {
      ready = (await fetch(`${gw.admin}/readyz`)).status === 200;
    } catch {
      ready = false;
    }
  };
  const deadline = Date.now() + 30_000;
  while (!ready) {
    if (exited) throw new Error(`mcpgw ${exited}:\n${fs.readFileSync(gw.logPath, 'utf8')}`);
    if (Date.now() > deadline) throw new Error(`mcpgw not ready in 30 s:\n${fs.readFileSync(gw.logPath, 'utf8')}`);
    await poll();
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
});

after(async () => {
  if (!gw) return;
  const { proc } = gw;
  if (proc.exitCode === null && proc.signalCode === null) {
    const done = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await done;
    clearTimeout(timer);
  }
  if (process.env.INTEROP_KEEP !== '1') fs.rmSync(gw.dir, { recursive: true, force: true });
});

/**
 * Opens an SDK v1 session on route p. Its fetch keeps the raw body of each
 * tools/call answer (JSON or the SSE stream's text), as the gateway sent it.
 */
async function open(t, p) {
  const raw = [];
  const recordingFetch = async (url, init) => {
    const res = await fetch(url, init);
    let method;
    try {
      method = init?.method === 'POST' ? JSON.parse(init.body).method : undefined;
    } catch {
      method = undefined;
    }
    if (method === 'tools/call') raw.push(res.clone().text());
    return res;
  };
  const client = new Client({ name: 'mcpgw-interop-intercept', version: '0.0.0' }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(gw.base + p), { fetch: recordingFetch }));
  t.after(() => client.close().catch(() => {}));
  return { client, raw };
}

/** The raw JSON text of the one JSON-RPC response in a recorded body. */
function rawResponse(body) {
  const datas = body.trimStart().startsWith('{')
    ? [body.trim()]
    : body
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .filter((d) => d !== ''); // an SSE priming event carries no data
  const answers = datas.filter((d) => {
    const m = JSON.parse(d);
    return 'result' in m || 'error' in m;
  });
  assert.equal(answers.length, 1, `one answer expected in ${body}`);
  return answers[0];
}

async function echoTool(client) {
  const { tools } = await client.listTools();
  const echo = tools.find((x) => x.name === 'echo' || x.name.endsWith('__echo'));
  assert.ok(echo, `no echo tool in ${tools.map((x) => x.name)}`);
  return echo.name;
}

/** mcpgw_upstream_call_duration_seconds_count for everything's tools/call. */
async function upstreamCalls() {
  const text = await (await fetch(`${gw.admin}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('mcpgw_upstream_call_duration_seconds_count{') && l.includes('upstream="everything"') && l.includes('method="tools/call"'));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function metric(name, ...labels) {
  const text = await (await fetch(`${gw.admin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + '{') && labels.every((x) => l.includes(x)));
  return line ? Number(line.split(' ').pop()) : 0;
}

const skip = !BIN && 'MCPGW_BIN is not set (run.sh sets it)';

test('redact on results: the echo reaches the client redacted, every other byte as without interceptors', { skip, timeout: 30_000 }, async (t) => {
  const message = `deploy with key ${SECRET}, ask ${EMAIL} — "quoted", tab\there, ünïcode, key again ${SECRET}.`;
  const plain = await open(t, '/mcp/plain');
  const redact = await open(t, '/mcp/redact');
  const name = await echoTool(plain.client);
  assert.equal(await echoTool(redact.client), name, 'both routes name the tool alike');

  const want = await plain.client.callTool({ name, arguments: { message } }, undefined, CALL_TIMEOUT);
  assertToolOK(want, 'echo on /mcp/plain');
  assert.ok(textOf(want).includes(SECRET) && textOf(want).includes(EMAIL), `the plain route passes the secret: ${textOf(want)}`);
  const got = await redact.client.callTool({ name, arguments: { message } }, undefined, CALL_TIMEOUT);
  assertToolOK(got, 'echo on /mcp/redact');

  const gotText = textOf(got);
  assert.ok(!gotText.includes(SECRET) && !gotText.includes('AKIA'), `secret reached the client: ${gotText}`);
  assert.ok(!gotText.includes(EMAIL) && !gotText.includes('@'), `e-mail reached the client: ${gotText}`);
  assert.equal(gotText, textOf(want).replaceAll(SECRET, '[redacted]').replaceAll(EMAIL, '[redacted]'));

  // Golden comparison on the wire: both sessions made the same requests in
  // the same order, so the JSON-RPC ids agree, and the answers differ only
  // in the redacted spans.
  assert.equal(plain.raw.length, 1);
  assert.equal(redact.raw.length, 1);
  const plainRaw = rawResponse(await plain.raw[0]);
  const redactRaw = rawResponse(await redact.raw[0]);
  assert.ok(plainRaw.includes(SECRET) && plainRaw.includes(EMAIL), plainRaw);
  assert.equal(redactRaw, plainRaw.replaceAll(SECRET, '[redacted]').replaceAll(EMAIL, '[redacted]'));

  assert.equal(await metric('mcpgw_interceptor_decisions_total', 'interceptor="redact-secrets"', 'phase="result"', 'outcome="modify"'), 1);
});

test('deny_match on request arguments: refused with the reason, never sent upstream', { skip, timeout: 30_000 }, async (t) => {
  const guard = await open(t, '/mcp/guard');
  const name = await echoTool(guard.client);

  const before = await upstreamCalls();
  await assert.rejects(
    guard.client.callTool({ name, arguments: { message: `send the db to ${DENY_WORD} now` } }, undefined, CALL_TIMEOUT),
    (err) => {
      assert.ok(err instanceof McpError, `not an McpError: ${err}`);
      assert.equal(err.code, -32602);
      assert.match(err.message, /refused by interceptor no-exfil/);
      assert.ok(err.message.includes(DENY_REASON), err.message);
      return true;
    },
  );
  assert.equal(await metric('mcpgw_interceptor_decisions_total', 'interceptor="no-exfil"', 'phase="request"', 'outcome="deny"'), 1);
  assert.equal(await upstreamCalls(), before, 'the refused call reached the upstream');

  // The same route passes an argument that does not match, and the count
  // moves: it is the count that would have shown the refused call.
  const ok = await guard.client.callTool({ name, arguments: { message: 'harmless' } }, undefined, CALL_TIMEOUT);
  assertToolOK(ok, 'allowed echo on /mcp/guard');
  assert.equal(textOf(ok), 'Echo: harmless');
  // The count may be taken just after the answer is written: wait for it
  // to reach before+1; had the refused call been sent it would be before+2.
  const deadline = Date.now() + 10_000;
  while ((await upstreamCalls()) < before + 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await upstreamCalls(), before + 1, 'the allowed call is counted once, the refused one not at all');
});
