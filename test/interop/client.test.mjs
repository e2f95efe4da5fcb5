// Interop test: the official TypeScript MCP SDK client talks to mcpgw, which
// fronts three real npm MCP servers as stdio children:
//
//   everything -> @modelcontextprotocol/server-everything (stdio)
//   fs         -> @modelcontextprotocol/server-filesystem <MCPGW_FS_DIR>
//   memory     -> @modelcontextprotocol/server-memory
//
// Modes:
//   MCPGW_URL=http://127.0.0.1:PORT/mcp MCPGW_FS_DIR=/dir node --test test/interop/client.test.mjs
//     Gateway mode (what run.sh does): one Streamable HTTP session per test.
//   INTEROP_DIRECT=1 node --test test/interop/client.test.mjs
//     Direct mode: the same assertions against each server spawned directly over
//     stdio. A small in-process facade (DirectGateway) presents the gateway's
//     view of them (names "<upstream>__<name>", resource URIs the upstream's
//     own while unique on the route), so the test logic is validated without
//     the gateway.
//
// Every test opens its own session and uses unique names for anything it
// creates, so tests do not depend on each other or on run order.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DIRECT = process.env.INTEROP_DIRECT === '1';
const GATEWAY_URL = process.env.MCPGW_URL;
const SEP = '__';
const UPSTREAMS = ['everything', 'fs', 'memory'];
const TEST_TIMEOUT = 20_000;

if (!DIRECT && !GATEWAY_URL) {
  throw new Error('set MCPGW_URL (e.g. http://127.0.0.1:18080/mcp) or INTEROP_DIRECT=1');
}

const uid = () => `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

// ---------------------------------------------------------------- fixtures

let fsDir = process.env.MCPGW_FS_DIR;
let ownTmp; // temp dir this file created (direct mode without MCPGW_FS_DIR)

before(async () => {
  if (!fsDir || !process.env.MEMORY_FILE_PATH) {
    ownTmp = await mkdtemp(path.join(tmpdir(), 'mcpgw-interop-'));
  }
  if (!fsDir) {
    if (!DIRECT) throw new Error('MCPGW_FS_DIR must name the directory the gateway gave the fs upstream');
    fsDir = ownTmp;
  }
});

after(async () => {
  if (ownTmp) await rm(ownTmp, { recursive: true, force: true });
});

// ---------------------------------------------------------------- connections

/** Opens a downstream session to the gateway (or the direct facade). */
async function open(t) {
  const c = DIRECT ? new DirectGateway() : await openGateway();
  t.after(() => c.close().catch(() => {}));
  return c;
}

async function openGateway() {
  const client = new Client({ name: 'mcpgw-interop', version: '0.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(GATEWAY_URL));
  await client.connect(transport);
  client.interopTransport = transport;
  return client;
}

const entry = (pkg) => path.join(HERE, 'node_modules', '@modelcontextprotocol', pkg, 'dist', 'index.js');

function directServerParams(upstream) {
  switch (upstream) {
    case 'everything':
      return { command: process.execPath, args: [entry('server-everything'), 'stdio'] };
    case 'fs':
      return { command: process.execPath, args: [entry('server-filesystem'), fsDir] };
    case 'memory':
      return {
        command: process.execPath,
        args: [entry('server-memory')],
        env: { MEMORY_FILE_PATH: process.env.MEMORY_FILE_PATH || path.join(ownTmp, 'memory.jsonl') },
      };
    default:
      return undefined;
  }
}

/**
 * DirectGateway is a reference model of the gateway for direct mode: it exposes
 * the subset of the SDK Client API these tests use, spawns each upstream lazily
 * over stdio, and namespaces names and URIs the way the gateway contract says.
 */
class DirectGateway {
  constructor() {
    this.clients = new Map();
    this.owners = new Map(); // resource URI -> the upstream that lists it
  }

  async up(name) {
    let p = this.clients.get(name);
    if (!p) {
      const params = directServerParams(name);
      if (!params) return undefined;
      p = (async () => {
        const client = new Client({ name: 'mcpgw-interop-direct', version: '0.0.0' }, { capabilities: {} });
        const transport = new StdioClientTransport({ ...params, stderr: 'ignore' });
        await client.connect(transport);
        return client;
      })();
      this.clients.set(name, p);
    }
    return p;
  }

  split(prefixed) {
    const i = prefixed.indexOf(SEP);
    if (i <= 0) return [undefined, prefixed];
    return [prefixed.slice(0, i), prefixed.slice(i + SEP.length)];
  }

  getServerVersion() {
    return { name: 'direct-facade', version: '0.0.0' };
  }

  getServerCapabilities() {
    return { tools: {}, prompts: {}, resources: {} };
  }

  async upstreamServerVersions() {
    const out = {};
    for (const u of UPSTREAMS) out[u] = (await this.up(u)).getServerVersion();
    return out;
  }

  // The facade never paginates: it returns everything on one page.
  async listAll(method, key, rewrite) {
    const out = [];
    for (const u of UPSTREAMS) {
      const c = await this.up(u);
      const caps = c.getServerCapabilities() || {};
      const capKey = key === 'tools' ? 'tools' : key === 'prompts' ? 'prompts' : 'resources';
      if (!caps[capKey]) continue;
      let cursor;
      do {
        const r = await c[method](cursor ? { cursor } : {});
        for (const item of r[key]) out.push(rewrite(u, item));
        cursor = r.nextCursor;
      } while (cursor);
    }
    return { [key]: out };
  }

  listTools() {
    return this.listAll('listTools', 'tools', (u, t) => ({ ...t, name: u + SEP + t.name }));
  }

  listPrompts() {
    return this.listAll('listPrompts', 'prompts', (u, p) => ({ ...p, name: u + SEP + p.name }));
  }

  // The three servers' URIs do not collide: each stays as its server has it.
  listResources() {
    return this.listAll('listResources', 'resources', (u, r) => {
      this.owners.set(r.uri, u);
      return r;
    });
  }

  async callTool(params) {
    const [u, name] = this.split(params.name);
    const c = u && (await this.up(u));
    if (!c) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
    // Populate the per-upstream output-schema cache like a real client would.
    await c.listTools();
    return c.callTool({ ...params, name });
  }

  async getPrompt(params) {
    const [u, name] = this.split(params.name);
    const c = u && (await this.up(u));
    if (!c) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${params.name}`);
    return c.getPrompt({ ...params, name });
  }

  async readResource(params) {
    const u = this.owners.get(params.uri);
    const c = u && (await this.up(u));
    if (!c) throw new McpError(ErrorCode.InvalidParams, `Unknown resource: ${params.uri}`);
    return c.readResource(params);
  }

  async close() {
    const all = await Promise.allSettled([...this.clients.values()]);
    await Promise.allSettled(all.filter((s) => s.status === 'fulfilled').map((s) => s.value.close()));
  }
}

// ---------------------------------------------------------------- helpers

/** Lists every page of tools/prompts/resources, following nextCursor. */
async function listAll(c, kind) {
  const method = { tools: 'listTools', prompts: 'listPrompts', resources: 'listResources' }[kind];
  const items = [];
  const seen = new Set();
  let cursor;
  for (let page = 0; ; page++) {
    assert.ok(page < 100, `${kind}/list: more than 100 pages, cursor loop?`);
    const r = await c[method](cursor === undefined ? {} : { cursor });
    assert.ok(Array.isArray(r[kind]), `${kind}/list result has no ${kind} array: ${JSON.stringify(r)}`);
    items.push(...r[kind]);
    cursor = r.nextCursor;
    if (cursor === undefined || cursor === null) break;
    assert.equal(typeof cursor, 'string', `${kind}/list nextCursor must be a string`);
    assert.ok(!seen.has(cursor), `${kind}/list returned cursor ${cursor} twice`);
    seen.add(cursor);
  }
  return items;
}

const textOf = (result) =>
  (result.content || [])
    .filter((b) => b.type === 'text')
    .map((b) => b.text)
    .join('');

function assertToolOK(result, what) {
  assert.ok(!result.isError, `${what} returned isError: ${JSON.stringify(result)}`);
  assert.ok(Array.isArray(result.content) && result.content.length > 0, `${what}: empty content: ${JSON.stringify(result)}`);
}

// ---------------------------------------------------------------- tests

test('initialize succeeds and reports server info', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const info = c.getServerVersion();
  assert.ok(info, 'no serverInfo after initialize');
  assert.equal(typeof info.name, 'string');
  assert.ok(info.name.length > 0, 'serverInfo.name is empty');
  assert.equal(typeof info.version, 'string');
  const caps = c.getServerCapabilities();
  assert.ok(caps, 'no server capabilities after initialize');
  for (const k of ['tools', 'prompts', 'resources']) {
    assert.ok(caps[k], `server capabilities lack ${k}: ${JSON.stringify(caps)}`);
  }
  if (DIRECT) {
    const ups = await c.upstreamServerVersions();
    for (const u of UPSTREAMS) assert.ok(ups[u]?.name, `${u}: no serverInfo.name`);
    t.diagnostic(`upstreams: ${JSON.stringify(ups)}`);
  } else {
    t.diagnostic(`serverInfo=${JSON.stringify(info)} protocolVersion=${c.interopTransport.protocolVersion} session=${c.interopTransport.sessionId}`);
  }
});

test('tools/list merges prefixed tools from all three upstreams', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const tools = await listAll(c, 'tools');
  const names = tools.map((x) => x.name);
  t.diagnostic(`${names.length} tools`);

  assert.equal(new Set(names).size, names.length, `duplicate tool names: ${names}`);
  for (const n of names) {
    assert.match(n, /^(everything|fs|memory)__./, `tool name without a known upstream prefix: ${n}`);
  }
  for (const want of [
    'everything__echo',
    'everything__get-sum',
    'fs__read_text_file',
    'fs__write_file',
    'fs__list_directory',
    'memory__create_entities',
    'memory__read_graph',
  ]) {
    assert.ok(names.includes(want), `tools/list lacks ${want}; got ${names.join(', ')}`);
  }

  // Pass-through: schemas and annotations arrive as the upstream wrote them.
  const byName = new Map(tools.map((x) => [x.name, x]));
  const sum = byName.get('everything__get-sum');
  assert.equal(sum.inputSchema?.type, 'object');
  assert.deepEqual(Object.keys(sum.inputSchema.properties ?? {}).sort(), ['a', 'b']);
  assert.equal(sum.annotations?.readOnlyHint, true);
  assert.equal(sum.title, 'Get Sum Tool');
  const write = byName.get('fs__write_file');
  assert.equal(write.outputSchema?.type, 'object', 'fs__write_file lost its outputSchema');
  assert.equal(write.annotations?.destructiveHint, true);
  const create = byName.get('memory__create_entities');
  assert.ok(create.inputSchema?.properties?.entities, 'memory__create_entities lost inputSchema.properties.entities');
});

test('everything__echo echoes', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const msg = `hello through mcpgw ${uid()} ünïcödé ✓`;
  const r = await c.callTool({ name: 'everything__echo', arguments: { message: msg } });
  assertToolOK(r, 'everything__echo');
  assert.equal(textOf(r), `Echo: ${msg}`);
});

test('everything__get-sum adds', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const r = await c.callTool({ name: 'everything__get-sum', arguments: { a: 19, b: 23.5 } });
  assertToolOK(r, 'everything__get-sum');
  const text = textOf(r);
  const nums = (text.match(/-?\d+(?:\.\d+)?/g) || []).map(Number);
  assert.ok(nums.length > 0, `no number in ${JSON.stringify(text)}`);
  assert.equal(nums[nums.length - 1], 42.5, `unexpected sum text ${JSON.stringify(text)}`);
});

test('fs__write_file then fs__read_text_file round-trips', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const file = path.join(fsDir, `interop-${uid()}.txt`);
  const content = `line one ${uid()}\nline two: ünïcödé ✓ "quotes" \\ backslash\n`;
  t.after(() => rm(file, { force: true }));

  const w = await c.callTool({ name: 'fs__write_file', arguments: { path: file, content } });
  assertToolOK(w, 'fs__write_file');
  // The file really is on disk, written by the upstream child.
  assert.equal(await readFile(file, 'utf8'), content);

  const r = await c.callTool({ name: 'fs__read_text_file', arguments: { path: file } });
  assertToolOK(r, 'fs__read_text_file');
  assert.equal(textOf(r), content);
  assert.equal(r.structuredContent?.content, content, 'structuredContent.content differs from the file');
});

test('fs__ rejects a path outside the allowed directory', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  // The upstream's own refusal must come back (not e.g. "tool not found").
  const outside = path.join(path.dirname(path.resolve(fsDir)), `interop-outside-${uid()}.txt`);
  let msg;
  try {
    const r = await c.callTool({ name: 'fs__read_text_file', arguments: { path: outside } });
    assert.equal(r.isError, true, `reading outside the allowed dir succeeded: ${JSON.stringify(r)}`);
    msg = textOf(r);
  } catch (err) {
    assert.ok(err instanceof McpError, `expected McpError, got ${err?.stack ?? err}`);
    msg = err.message;
  }
  assert.match(msg, /Access denied - path outside allowed directories/, `unexpected refusal: ${msg}`);
});

test('memory__create_entities then memory__read_graph', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const name = `interop-entity-${uid()}`;
  const entity = { name, entityType: 'interop-test', observations: ['created through mcpgw'] };

  const cr = await c.callTool({ name: 'memory__create_entities', arguments: { entities: [entity] } });
  assertToolOK(cr, 'memory__create_entities');
  t.after(() =>
    c.callTool({ name: 'memory__delete_entities', arguments: { entityNames: [name] } }).catch(() => {}),
  );

  const g = await c.callTool({ name: 'memory__read_graph', arguments: {} });
  assertToolOK(g, 'memory__read_graph');
  const graph = g.structuredContent ?? JSON.parse(textOf(g));
  assert.ok(Array.isArray(graph.entities), `read_graph without entities: ${JSON.stringify(g)}`);
  const found = graph.entities.find((e) => e.name === name);
  assert.ok(found, `entity ${name} not in graph`);
  assert.equal(found.entityType, 'interop-test');
  assert.deepEqual(found.observations, ['created through mcpgw']);
});

test('prompts/list and prompts/get', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const prompts = await listAll(c, 'prompts');
  const names = prompts.map((p) => p.name);
  t.diagnostic(`prompts: ${names.join(', ')}`);
  for (const n of names) assert.match(n, /^(everything|fs|memory)__./, `prompt without upstream prefix: ${n}`);
  assert.ok(names.includes('everything__simple-prompt'), `no everything__simple-prompt in ${names}`);
  const args = prompts.find((p) => p.name === 'everything__args-prompt');
  assert.ok(args, 'no everything__args-prompt');
  assert.ok(args.arguments?.some((a) => a.name === 'city' && a.required === true), 'args-prompt lost its arguments');

  const simple = await c.getPrompt({ name: 'everything__simple-prompt' });
  assert.ok(Array.isArray(simple.messages) && simple.messages.length > 0, `empty prompt: ${JSON.stringify(simple)}`);
  assert.equal(simple.messages[0].role, 'user');
  assert.equal(simple.messages[0].content.text, 'This is a simple prompt without arguments.');

  const withArgs = await c.getPrompt({ name: 'everything__args-prompt', arguments: { city: 'Lyon' } });
  assert.match(JSON.stringify(withArgs.messages), /Lyon/);
});

test('resources/list and resources/read', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  const resources = await listAll(c, 'resources');
  const uris = resources.map((r) => r.uri);
  t.diagnostic(`${uris.length} resources`);
  // No two servers share a URI: every one is its server's own, untouched.
  for (const u of uris) assert.doesNotMatch(u, /^(everything|fs|memory)\+|[?&]mcpgw=/, `resource URI renamed although unique: ${u}`);

  const everything = resources.filter((r) => r.uri.startsWith('demo://'));
  assert.ok(everything.length > 0, `no demo:// (everything) resources in ${uris}`);
  const doc = everything.find((r) => r.uri.startsWith('demo://resource/static/document/'));
  assert.ok(doc, `no static document resource in ${uris}`);
  assert.ok(doc.name, 'resource lost its name');
  assert.ok(doc.mimeType, 'resource lost its mimeType');
  assert.ok(uris.includes('memory://knowledge-graph'), `no memory://knowledge-graph in ${uris}`);

  const r = await c.readResource({ uri: doc.uri });
  assert.ok(Array.isArray(r.contents) && r.contents.length > 0, `empty contents: ${JSON.stringify(r)}`);
  const first = r.contents[0];
  assert.ok(typeof first.text === 'string' || typeof first.blob === 'string', 'content has neither text nor blob');
  assert.ok((first.text ?? first.blob).length > 0, 'content is empty');
  t.diagnostic(`read ${doc.uri} -> contents[0].uri=${first.uri} mimeType=${first.mimeType}`);
});

test('unknown tool nosuch__tool is an error', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  let r;
  try {
    r = await c.callTool({ name: 'nosuch__tool', arguments: {} });
  } catch (err) {
    assert.ok(err instanceof McpError, `expected McpError, got ${err?.stack ?? err}`);
    assert.equal(err.code, ErrorCode.InvalidParams, `expected -32602, got ${err.code}: ${err.message}`);
    t.diagnostic(`JSON-RPC error ${err.code}: ${err.message}`);
    return;
  }
  assert.equal(r.isError, true, `unknown tool returned a non-error result: ${JSON.stringify(r)}`);
  t.diagnostic(`isError result: ${textOf(r)}`);
});

test('unknown tool on a known upstream is an error', { timeout: TEST_TIMEOUT }, async (t) => {
  const c = await open(t);
  let r;
  try {
    r = await c.callTool({ name: 'everything__no-such-tool', arguments: {} });
  } catch (err) {
    assert.ok(err instanceof McpError, `expected McpError, got ${err?.stack ?? err}`);
    assert.equal(err.code, ErrorCode.InvalidParams, `expected -32602, got ${err.code}: ${err.message}`);
    t.diagnostic(`JSON-RPC error ${err.code}: ${err.message}`);
    return;
  }
  assert.equal(r.isError, true, `unknown tool returned a non-error result: ${JSON.stringify(r)}`);
  t.diagnostic(`isError result: ${textOf(r)}`);
});

test('session can be terminated with DELETE', { timeout: TEST_TIMEOUT, skip: DIRECT && 'gateway only' }, async (t) => {
  const c = await open(t);
  const tr = c.interopTransport;
  if (!tr.sessionId) {
    t.diagnostic('gateway issued no Mcp-Session-Id (stateless); nothing to terminate');
    return;
  }
  await c.callTool({ name: 'everything__echo', arguments: { message: 'before delete' } });
  await tr.terminateSession();
  assert.equal(tr.sessionId, undefined);
});
