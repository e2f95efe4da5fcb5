// Sign-in through mcpgw (login:, docs/login.md) with real clients, knowing
// only the route's URL: the official TypeScript SDK client v1 and v2 read
// the protected-resource metadata, discover the gateway as authorization
// server, register (RFC 7591, or a Client ID Metadata Document served here
// on 127.0.0.1), send the user's browser (browser.mjs: fetch with a cookie
// jar that fills the provider's login form and the gateway's consent form)
// through the provider and back, get the gateway's token, and list and
// call tools; mcp-remote does the same with the browser it opens
// (BROWSER). The provider is the real test OP (test/idp) without dynamic
// registration, where the gateway is one pre-registered confidential
// client: once with RFC 8414 metadata and remembered consent, once
// Entra-like (resource refused with invalid_target) with OpenID discovery
// only. A denied consent gives the client access_denied.
//
// It starts its own OPs and gateways (MCPGW_BIN, MCPGW_IDP_BIN; skipped
// without the OP unless MCPGW_REQUIRE_IDP=1).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import * as v2 from '@modelcontextprotocol/client';
import { Browser } from './browser.mjs';
import { textOf, waitFor } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.MCPGW_BIN;
const idpBin = process.env.MCPGW_IDP_BIN;
const skip = !idpBin && process.env.MCPGW_REQUIRE_IDP !== '1' ? 'the test OP is not built (MCPGW_IDP_BIN; .ci/run sets it)' : false;
const children = [];
let dir, cimd, cimdHits = 0;
// gw is the gateway whose provider publishes RFC 8414 metadata and
// remembers consent; entra the one whose provider refuses resource and
// has only OpenID discovery.
let gw, entra;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// startIdP runs the test OP with cfg and resolves to its issuer.
function startIdP(name, cfg) {
  const file = path.join(dir, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(cfg));
  const p = spawn(idpBin, ['-addr', '127.0.0.1:0', '-config', file, '-exit-on-eof'], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(() => p.stdin.end());
  return new Promise((resolve, reject) => {
    readline.createInterface({ input: p.stdout }).once('line', (line) => resolve(JSON.parse(line).issuer));
    p.once('exit', (code) => reject(new Error(`the test OP ${name} exited (${code})`)));
  });
}

// startGateway runs mcpgw with login: at a provider of the given mode
// (test/idp's discovery, reject_resource, remember_consent), and the
// demo server on /mcp.
async function startGateway(name, mode, { perUser = false } = {}) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const clients = [{ id: 'mcpgw', type: 'web', secret: `${name}-secret`, redirect_uris: [`${base}/oauth/callback`] }];
  if (perUser) clients.push({ id: 'mcpgw-saas', type: 'web', secret: `${name}-saas-secret`, redirect_uris: [`${base}/oauth/upstream/saas/callback`] });
  const issuer = await startIdP(name, {
    users: ['alice', 'bob', 'mallory'].map((u) => ({ id: u, username: u, password: `pw-${u}` })),
    clients,
    ...mode,
  });
  // The per-user upstream saas: its own client at the same provider.
  const saas = [];
  let upstream;
  if (perUser) {
    upstream = await startProtectedUpstream(issuer, 'mcpgw-saas');
    const saasSecret = path.join(dir, `${name}-saas-secret`);
    fs.writeFileSync(saasSecret, `${name}-saas-secret\n`);
    saas.push(
      '  saas:',
      `    url: ${upstream.url}`,
      `    auth: {per_user: {client_id: mcpgw-saas, client_secret_file: "${saasSecret}", issuer: "${issuer}", scopes: [openid]}}`,
    );
  }
  const secret = path.join(dir, `${name}-secret`);
  fs.writeFileSync(secret, `${name}-secret\n`);
  const state = path.join(dir, `${name}-state`);
  fs.mkdirSync(state);
  const config = path.join(dir, `${name}.yaml`);
  fs.writeFileSync(config, [
    `listen: 127.0.0.1:${port}`,
    `public_url: ${base}`,
    'login:',
    `  provider: {issuer: "${issuer}", client_id: mcpgw, client_secret_file: "${secret}"}`,
    '  insecure_client_metadata_loopback: true',
    'policy: {default: allow}',
    'upstreams:',
    `  demo: {command: ["${bin}", demo-server]}`,
    ...saas,
    'routes:',
    '  - {path: /mcp, upstreams: [demo]}',
    ...(perUser ? ['  - {path: /saas, upstreams: [saas]}'] : []),
    '',
  ].join('\n'));
  const proc = spawn(bin, ['run', '--config', config], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, STATE_DIRECTORY: state } });
  let logs = '';
  proc.stderr.on('data', (b) => { logs += b; });
  children.push(() => proc.kill('SIGTERM'));
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      if ((await fetch(`${base}/mcp`, { method: 'POST' })).status === 401) break;
    } catch { /* not listening yet */ }
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`mcpgw (${name}) did not start:\n${logs}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { base, url: `${base}/mcp`, issuer, upstream, logs: () => logs };
}

// verify checks an RS256 JWT of the OP at issuer: signature (its JWKS),
// iss, exp and aud.
async function verify(issuer, token, audience) {
  const [h, p, sig] = token.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  const { keys } = await (await fetch(`${issuer}keys`)).json();
  const jwk = keys.find((k) => k.kid === header.kid);
  if (!jwk || header.alg !== 'RS256') throw new Error('unknown key or algorithm');
  const ok = crypto.verify('sha256', Buffer.from(`${h}.${p}`), crypto.createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(sig, 'base64url'));
  const c = JSON.parse(Buffer.from(p, 'base64url'));
  if (!ok || c.iss !== issuer || c.exp * 1000 < Date.now() || ![].concat(c.aud).includes(audience)) throw new Error('token refused');
  return c;
}

// startProtectedUpstream is an SDK server whose whoami names the user of
// the OP token it was called with (RFC 9728 metadata naming the OP).
async function startProtectedUpstream(issuer, audience) {
  const up = {};
  const srv = http.createServer(async (req, res) => {
    if (req.url.startsWith('/.well-known/oauth-protected-resource')) {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ resource: up.url, authorization_servers: [issuer] }));
      return;
    }
    let c;
    try {
      c = await verify(issuer, (req.headers.authorization ?? '').replace(/^Bearer /, ''), audience);
    } catch {
      res.writeHead(401, { 'WWW-Authenticate': `Bearer resource_metadata="${new URL(up.url).origin}/.well-known/oauth-protected-resource/mcp"` });
      res.end();
      return;
    }
    const server = new McpServer({ name: 'saas', version: '1.0.0' });
    server.registerTool('whoami', { description: 'whose account this is' }, async () => ({ content: [{ type: 'text', text: c.sub }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  children.push(() => srv.close());
  up.url = `http://127.0.0.1:${srv.address().port}/mcp`;
  return up;
}

before(async () => {
  if (skip) return;
  assert.ok(bin, 'MCPGW_BIN must name the mcpgw binary (run.sh sets it)');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpgw-login-'));
  // The Client ID Metadata Document, on loopback (the gateway allows http
  // there only under login.insecure_client_metadata_loopback).
  cimd = http.createServer((req, res) => {
    cimdHits++;
    const id = `http://127.0.0.1:${cimd.address().port}/client.json`;
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({
      client_id: id, client_name: 'interop CIMD client', redirect_uris: ['http://127.0.0.1:9/cimd-callback'],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none',
    }));
  });
  await new Promise((r) => cimd.listen(0, '127.0.0.1', r));
  gw = await startGateway('rfc8414', { discovery: 'both', remember_consent: true }, { perUser: true });
  entra = await startGateway('entra', { discovery: 'oidc', reject_resource: true });
});

after(() => {
  for (const stop of children) stop();
  cimd?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// Provider is an OAuthClientProvider (the same members in SDK v1 and v2)
// whose browser is a Browser: redirectToAuthorization walks it to the
// client's redirect URI and keeps where it landed.
class Provider {
  constructor(browser, { redirect = 'http://127.0.0.1:9/callback', name = 'interop client' } = {}) {
    this.browser = browser;
    this.redirect = redirect;
    this.name = name;
    this.registered = 0;
  }
  get redirectUrl() { return this.redirect; }
  get clientMetadata() {
    return { client_name: this.name, redirect_uris: [this.redirect], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; this.registered++; }
  tokens() { return this.tok; }
  saveTokens(t) { this.tok = t; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(url) {
    this.authorizationURL = new URL(url);
    const page = await this.browser.visit(url.toString(), (u) => u.href.startsWith(this.redirect));
    assert.equal(page.status, 0, `the browser did not come back to ${this.redirect}: ${page.status} at ${page.url}: ${page.body.slice(0, 500)}`);
    this.landed = new URL(page.url);
  }
}

// connectV1 connects the SDK v1 client to url through the whole flow.
async function connectV1(url, provider, options = undefined) {
  let client = new Client({ name: 'interop-login-v1', version: '1.0.0' }, options);
  let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await assert.rejects(client.connect(transport), UnauthorizedError);
  assert.ok(provider.landed, 'the client never sent the browser to authorize');
  assert.equal(provider.landed.searchParams.get('error'), null, `authorization failed: ${provider.landed}`);
  await transport.finishAuth(provider.landed.searchParams.get('code'));
  client = new Client({ name: 'interop-login-v1', version: '1.0.0' }, options);
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  return client;
}

// echoes lists the tools and calls the demo's echo.
async function echoes(client, list = (c) => c.listTools()) {
  const { tools } = await list(client);
  const echo = tools.find((t) => t.name.endsWith('echo'));
  assert.ok(echo, `no echo tool among ${tools.map((t) => t.name)}`);
  const res = await client.callTool({ name: echo.name, arguments: { text: 'signed in' } });
  assert.match(textOf(res), /signed in/);
}

// claims decodes a JWT's payload (the gateway's token; checked as a
// client would see it, without verifying: the route's 200 is the proof).
const claims = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url'));

test('SDK v1 knowing only the URL: discovers, registers dynamically, signs in, lists and calls; the token is the gateway\'s, bound to the route, and refreshes with rotation', { skip }, async () => {
  const prm = await (await fetch(`${gw.base}/.well-known/oauth-protected-resource/mcp`)).json();
  assert.deepEqual(prm.authorization_servers, [gw.base], `the route's metadata names the gateway: ${JSON.stringify(prm)}`);
  const alice = new Browser('alice');
  const p = new Provider(alice);
  const client = await connectV1(gw.url, p);
  try {
    await echoes(client);
  } finally {
    await client.close();
  }
  assert.equal(p.registered, 1, 'one dynamic registration');
  assert.equal(alice.logins, 1, 'one sign-in at the provider');
  assert.equal(alice.consents, 1, 'one consent at the gateway');
  assert.match(alice.lastConsentPage, /interop client/, 'the consent page names the client');
  assert.equal(p.landed.searchParams.get('iss'), gw.base, 'RFC 9207 iss in the authorization response');
  const c = claims(p.tok.access_token);
  assert.equal(c.iss, gw.base, 'the gateway issued the token, not the provider');
  assert.deepEqual([].concat(c.aud), [gw.url], 'audience-bound to the route');
  assert.equal(c.client_id, p.info.client_id);
  assert.equal(c.sub, 'alice');
  // The route refuses the token on another gateway (the entra one).
  const other = await fetch(entra.url, init(p.tok.access_token));
  assert.equal(other.status, 401, 'another gateway refuses the token');
  const onSaas = await fetch(`${gw.base}/saas`, { ...init(p.tok.access_token) });
  assert.equal(onSaas.status, 401, 'another route of the same gateway refuses the token');

  // Refresh rotates; presenting a used refresh token revokes the family.
  assert.ok(p.tok.refresh_token, 'a refresh token');
  const meta = await (await fetch(`${gw.base}/.well-known/oauth-authorization-server`)).json();
  const refresh = (rt) => fetch(meta.token_endpoint, {
    method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: rt, client_id: p.info.client_id }),
  });
  let res = await refresh(p.tok.refresh_token);
  assert.equal(res.status, 200, await res.clone().text());
  const next = await res.json();
  assert.ok(next.refresh_token && next.refresh_token !== p.tok.refresh_token, 'a new refresh token');
  assert.equal(claims(next.access_token).iss, gw.base);
  res = await refresh(p.tok.refresh_token); // reused
  assert.equal((await res.json()).error, 'invalid_grant', 'a reused refresh token is refused');
  res = await refresh(next.refresh_token);
  assert.equal((await res.json()).error, 'invalid_grant', "the reuse revoked the family: the newest refresh token is refused too");
});

// init is a POST initialize with a bearer token.
const init = (token) => ({
  method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '0' } } }),
});

test('SDK v2 client: the same flow; consent is per client, so a second client asks again', { skip }, async () => {
  const alice = new Browser('alice');
  // First client (v1) in alice's browser, then the v2 client in the same
  // browser: signed in already, but its consent is its own.
  const first = await connectV1(gw.url, new Provider(alice, { name: 'first client' }));
  await first.close();
  const consents = alice.consents;
  const p = new Provider(alice, { name: 'v2 client', redirect: 'http://127.0.0.1:9/v2-callback' });
  let client = new v2.Client({ name: 'interop-login-v2', version: '1.0.0' });
  let transport = new v2.StreamableHTTPClientTransport(new URL(gw.url), { authProvider: p });
  await assert.rejects(client.connect(transport), (err) => err instanceof v2.UnauthorizedError || /unauthori[sz]ed/i.test(String(err)));
  assert.ok(p.landed, 'the v2 client never sent the browser to authorize');
  await transport.finishAuth(p.landed.searchParams);
  client = new v2.Client({ name: 'interop-login-v2', version: '1.0.0' });
  transport = new v2.StreamableHTTPClientTransport(new URL(gw.url), { authProvider: p });
  await client.connect(transport);
  try {
    await echoes(client);
  } finally {
    await client.close();
  }
  assert.equal(alice.consents, consents + 1, 'the second client was asked for consent again');
  assert.match(alice.lastConsentPage, /v2 client/);
});

test('a Client ID Metadata Document (a URL client_id) instead of registration', { skip }, async () => {
  const url = `http://127.0.0.1:${cimd.address().port}/client.json`;
  // The SDK takes a clientMetadataUrl only over https, so the test hands
  // it the URL as its client id, which is what it then sends (no
  // registration; client_id=URL at /authorize and /token).
  const p = new Provider(new Browser('bob'), { redirect: 'http://127.0.0.1:9/cimd-callback', name: 'interop CIMD client' });
  p.info = { client_id: url };
  const before = cimdHits;
  const client = await connectV1(gw.url, p);
  try {
    await echoes(client);
  } finally {
    await client.close();
  }
  assert.equal(p.info.client_id, url, `no dynamic registration (it would give another client id): ${JSON.stringify(p.info)}`);
  assert.ok(cimdHits > before, 'the gateway fetched the metadata document');
  assert.equal(claims(p.tok.access_token).client_id, url);
  assert.match(p.browser.lastConsentPage, /interop CIMD client/);
});

test('an Entra-like provider (resource refused) with only OpenID discovery works', { skip }, async () => {
  const bob = new Browser('bob');
  const p = new Provider(bob);
  const client = await connectV1(entra.url, p);
  try {
    await echoes(client);
  } finally {
    await client.close();
  }
  assert.ok(p.authorizationURL.searchParams.get('resource'), 'the client sent resource to the gateway (RFC 8707)');
  const toProvider = bob.visited.map((u) => new URL(u)).find((u) => u.href.startsWith(`${entra.issuer}auth?`));
  assert.ok(toProvider, `the browser went to the provider: ${bob.visited}`);
  assert.equal(toProvider.searchParams.get('resource'), null, 'the gateway did not pass resource on to the Entra-like provider');
  assert.equal((await fetch(`${entra.issuer}.well-known/oauth-authorization-server`)).status, 404, 'the provider has no RFC 8414 document');
});

test('consent denied gives the client access_denied', { skip }, async () => {
  const alice = new Browser('alice', { decision: 'deny' });
  const p = new Provider(alice, { name: 'denied client', redirect: 'http://127.0.0.1:9/denied' });
  const client = new Client({ name: 'interop-login-denied', version: '1.0.0' });
  await assert.rejects(client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { authProvider: p })), UnauthorizedError);
  assert.equal(alice.consents, 1);
  assert.equal(p.landed.searchParams.get('error'), 'access_denied', `landed at ${p.landed}`);
  assert.equal(p.landed.searchParams.get('state'), p.authorizationURL.searchParams.get('state'));
  assert.equal(p.tok, undefined, 'no token');
});

test('mcp-remote completes the flow with the browser it opens, then lists and calls', { skip }, async () => {
  const wrapper = path.join(dir, 'browser.sh');
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${path.join(here, 'browser.mjs')}" "$@"\n`, { mode: 0o755 });
  const trace = path.join(dir, 'mcp-remote-browser.jsonl');
  const config = path.join(dir, 'mcp-remote');
  fs.mkdirSync(config);
  const env = {
    ...process.env, BROWSER: wrapper, LOGIN_USER: 'bob', LOGIN_PASSWORD: 'pw-bob', LOGIN_TRACE: trace,
    MCP_REMOTE_CONFIG_DIR: config, DISPLAY: '', WAYLAND_DISPLAY: '', XDG_CURRENT_DESKTOP: '',
  };
  const port = await freePort();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.join(here, 'node_modules', 'mcp-remote', 'dist', 'proxy.js'), gw.url, String(port), '--allow-http', '--transport', 'http-only'],
    env, stderr: 'pipe',
  });
  let log = '';
  transport.stderr?.on('data', (b) => { log += b; });
  const client = new Client({ name: 'interop-login-mcp-remote', version: '1.0.0' });
  try {
    await client.connect(transport);
    await echoes(client);
  } catch (err) {
    const seen = fs.existsSync(trace) ? fs.readFileSync(trace, 'utf8') : '(the browser was never opened)';
    throw new Error(`${err}\nmcp-remote's log:\n${log.slice(-3000)}\nbrowser: ${seen}`);
  } finally {
    await client.close();
  }
  // The browser writes its trace after mcp-remote's callback page
  // answered, which may be after the client is connected.
  await waitFor(() => fs.existsSync(trace) && fs.readFileSync(trace, 'utf8').endsWith('\n'), 10000, "the browser's trace");
  const [visit] = fs.readFileSync(trace, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(visit.consents, 1, `the browser answered the gateway's consent: ${JSON.stringify(visit)}`);
});

// The per-user link (upstreams.saas.auth.per_user) with two signed-in
// browsers and a provider that approves remembered consent without a
// form: mallory's link opened in alice's browser, and alice's in
// mallory's, are refused with a page saying so and bind nothing; each
// user's own link works.
test('a per-user start link opens only in the signed-in browser of its user, both directions', { skip }, async () => {
  const saasURL = `${gw.base}/saas`;
  const users = {};
  for (const name of ['alice', 'mallory']) {
    const browser = new Browser(name);
    const p = new Provider(browser, { name: `${name}'s app`, redirect: `http://127.0.0.1:9/${name}` });
    const client = await connectV1(saasURL, p, { capabilities: { elicitation: { url: {} } } });
    users[name] = { browser, p, client };
  }
  // elicit calls whoami expecting -32042 and returns its start link.
  const elicit = async (name) => {
    const err = await users[name].client.callTool({ name: 'saas__whoami', arguments: {} }).then(
      (res) => assert.fail(`${name}'s call was not elicited: ${JSON.stringify(res)}`), (e) => e);
    assert.equal(err?.code, -32042, `${name}: want URLElicitationRequiredError, got ${err}`);
    const link = err.data.elicitations[0].url;
    assert.ok(link.startsWith(`${gw.base}/oauth/upstream/saas/start?t=`), link);
    return link;
  };
  const whoami = async (name) => textOf(await users[name].client.callTool({ name: 'saas__whoami', arguments: {} }));
  // open has a user's browser open a link; it resolves to the last page.
  const open = (name, link) => users[name].browser.visit(link);
  const revoke = async (name) => {
    const res = await fetch(`${gw.base}/oauth/upstream/saas/token`, { method: 'DELETE', headers: { Authorization: `Bearer ${users[name].p.tok.access_token}` } });
    assert.equal(res.status, 200, await res.text());
  };
  try {
    // Each authorizes saas with their own account first (so the provider
    // remembers their consent): fresh consent was asked all the same.
    for (const name of ['alice', 'mallory']) {
      const logins = users[name].browser.logins;
      const page = await open(name, await elicit(name));
      assert.equal(page.status, 200, page.body);
      assert.match(page.body, /You can close this window/);
      assert.equal(users[name].browser.logins, logins + 1, `${name} was asked at the provider again (prompt=consent)`);
      assert.equal(await whoami(name), name);
    }

    // mallory's link in alice's browser: refused, nothing bound.
    await revoke('mallory');
    const malloryLink = await elicit('mallory');
    const logins = users.alice.browser.logins;
    let page = await open('alice', malloryLink);
    assert.equal(page.status, 403, `alice opening mallory's link: ${page.status} at ${page.url}: ${page.body.slice(0, 300)}`);
    assert.match(page.body, /made for another gateway user/);
    assert.equal(users.alice.browser.logins, logins, "alice's browser was not sent to the provider");
    await elicit('mallory'); // still nothing bound for mallory
    assert.equal(await whoami('alice'), 'alice');

    // alice's link in mallory's browser: refused, nothing bound.
    await revoke('alice');
    const aliceLink = await elicit('alice');
    page = await open('mallory', aliceLink);
    assert.equal(page.status, 403, `mallory opening alice's link: ${page.status}: ${page.body.slice(0, 300)}`);
    await elicit('alice');

    // Each one's own link still works for them.
    page = await open('alice', aliceLink);
    assert.equal(page.status, 200, page.body);
    assert.equal(await whoami('alice'), 'alice');
    page = await open('mallory', malloryLink);
    assert.equal(page.status, 200, page.body);
    assert.equal(await whoami('mallory'), 'mallory');

    // A browser not signed in to the gateway is sent to sign in first,
    // then comes back to the link.
    await revoke('alice');
    const fresh = new Browser('alice');
    page = await fresh.visit(await elicit('alice'));
    assert.equal(page.status, 200, page.body);
    assert.equal(await whoami('alice'), 'alice');
  } finally {
    for (const u of Object.values(users)) await u.client.close();
  }
});
