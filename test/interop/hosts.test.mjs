// What a real AI host does, through one prefixed route of five npm servers
// (issue 12's first Must-show). Route /mcp/hosts in gateway.yaml.tmpl:
//
//   everything -> @modelcontextprotocol/server-everything (stdio)
//   fs         -> @modelcontextprotocol/server-filesystem <MCPGW_FS_DIR>
//   memory     -> @modelcontextprotocol/server-memory
//   basic      -> @modelcontextprotocol/server-basic-vanillajs --stdio   (MCP App)
//   budget     -> @modelcontextprotocol/server-budget-allocator --stdio  (MCP App)
//
// Ground truth is each server itself: before() spawns every one of them
// directly over stdio (StdioClientTransport) and records what it lists,
// serves and returns, and each test compares the gateway's answer with that:
//
//   - one tools/list, no cursor, holds every upstream's tools (many hosts,
//     and the Inspector CLI, never follow nextCursor);
//   - the Inspector CLI's tools/list shows them all;
//   - every _meta.ui.resourceUri a tool shows is a ui:// URI that
//     resources/read answers with the text/html;profile=mcp-app document;
//   - every resource_link from everything's get-resource-links reads;
//   - an MCP App tool called by its bare name works (an App's own
//     callServerTool uses the server's name for its tool).
//
//   MCPGW_HOSTS_URL=http://127.0.0.1:PORT/mcp/hosts MCPGW_FS_DIR=/dir node --test test/interop/hosts.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODULES = path.join(HERE, 'node_modules', '@modelcontextprotocol');
const HOSTS_URL = process.env.MCPGW_HOSTS_URL;
const FS_DIR = process.env.MCPGW_FS_DIR;
const SEP = '__';
const APP_MIME = 'text/html;profile=mcp-app';
const TEST_TIMEOUT = 30_000;

if (!HOSTS_URL) throw new Error('set MCPGW_HOSTS_URL (e.g. http://127.0.0.1:18080/mcp/hosts); run.sh does');
if (!FS_DIR) throw new Error('set MCPGW_FS_DIR to the directory the gateway gave the fs upstream; run.sh does');

// The route's upstreams, started the way gateway.yaml.tmpl starts them (keep
// the two in step). The MCP Apps examples serve HTTP on :3001 unless --stdio.
const UPSTREAMS = {
  everything: { args: [path.join(MODULES, 'server-everything/dist/index.js'), 'stdio'] },
  fs: { args: [path.join(MODULES, 'server-filesystem/dist/index.js'), FS_DIR] },
  memory: { args: [path.join(MODULES, 'server-memory/dist/index.js')], memory: true },
  basic: { args: [path.join(MODULES, 'server-basic-vanillajs/dist/index.js'), '--stdio'] },
  budget: { args: [path.join(MODULES, 'server-budget-allocator/dist/index.js'), '--stdio'] },
};

// What the gateway declares to its upstreams on their shared connection
// (internal/host gatewayCapabilities), which is the one tools/list goes
// through: server-everything registers some tools (get-roots-list,
// trigger-sampling-request, ...) only for clients that declare sampling,
// elicitation or roots, so the direct view declares the same.
const GATEWAY_CAPABILITIES = { elicitation: { form: {}, url: {} }, roots: { listChanged: false }, sampling: {} };

// get-resource-links returns at most 10 links; ask for all of them.
const LINK_COUNT = 10;

// ---------------------------------------------------------------- helpers

const prefixed = (upstream, name) => upstream + SEP + name;

/** Every item of a list method, following nextCursor. */
async function listAll(client, method, key) {
  const out = [];
  let cursor;
  let pages = 0;
  do {
    const r = await client[method](cursor ? { cursor } : undefined);
    out.push(...r[key]);
    cursor = r.nextCursor;
    if (++pages > 100) throw new Error(`${method}: more than 100 pages; a cursor loop?`);
  } while (cursor);
  return out;
}

/** "code message" of a failed request, for failure reports. */
const errText = (e) => (e && e.code !== undefined ? `${e.code} ${e.message}` : String(e?.message ?? e));

/** The app resource URIs a tool shows: _meta.ui.resourceUri and the older _meta["ui/resourceUri"]. */
const uiURIs = (tool) => ({ ui: tool._meta?.ui?.resourceUri, legacy: tool._meta?.['ui/resourceUri'] });

/** A content item's payload as text: text as is, blob decoded. */
const payloadOf = (c) => (c.text !== undefined ? c.text : Buffer.from(c.blob ?? '', 'base64').toString('utf8'));

// server-everything's dynamic resources say when they were read ("created at
// 8:39:24 AM"); the direct read and the gateway's are a moment apart.
const untimed = (s) => s.replace(/\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?/g, '<time>');

/** The structure of a JSON value (types, keys), without its values. */
function shapeOf(v) {
  if (Array.isArray(v)) return v.length ? [shapeOf(v[0])] : [];
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, shapeOf(v[k])]));
  return typeof v;
}

/** Names in want but not in got, and in got but not in want. */
function diffNames(got, want) {
  const g = new Set(got);
  const w = new Set(want);
  return { missing: want.filter((n) => !g.has(n)), extra: got.filter((n) => !w.has(n)) };
}

/** A failure message that says which upstreams' tools a listing lacks. */
function describeListing(what, got, truth) {
  const want = expectedToolNames(truth);
  const { missing, extra } = diffNames(got, want);
  const lines = [`${what} showed ${got.length - extra.length} of the route's ${want.length} tools${got.length <= 10 ? ` (${got.join(', ')})` : ''}`];
  for (const [u, t] of Object.entries(truth)) {
    const lack = t.tools.filter((x) => missing.includes(prefixed(u, x.name)));
    if (lack.length) lines.push(`  ${u}: ${lack.length} of ${t.tools.length} missing (${lack.map((x) => x.name).join(', ')})`);
  }
  if (extra.length) lines.push(`  not on any upstream: ${extra.join(', ')}`);
  return lines.join('\n');
}

/** Fails with header and one line per problem, unless there are none. */
function assertNoProblems(problems, header) {
  if (problems.length) assert.fail(`${header}:\n  ${problems.join('\n  ')}`);
}

const expectedToolNames = (truth) => Object.entries(truth).flatMap(([u, t]) => t.tools.map((x) => prefixed(u, x.name)));

// ---------------------------------------------------------------- ground truth

let truth; // upstream -> {tools, apps: {uri -> read result}, links?}
let gw; // one gateway session for the whole file
let memTmp;

/** Connects to an upstream directly, over stdio, as the gateway would. */
async function connectDirect(name) {
  const spec = UPSTREAMS[name];
  const env = { ...process.env };
  if (spec.memory) env.MEMORY_FILE_PATH = path.join(memTmp, 'memory.jsonl');
  const client = new Client({ name: 'mcpgw-interop-direct', version: '0.0.0' }, { capabilities: GATEWAY_CAPABILITIES });
  // The gateway answers roots/list from config; what it says does not matter here.
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
  await client.connect(new StdioClientTransport({ command: process.execPath, args: spec.args, env, stderr: 'ignore' }));
  return client;
}

/** What upstream name lists and serves, read from the server itself. */
async function observe(name) {
  const c = await connectDirect(name);
  try {
    const tools = await listAll(c, 'listTools', 'tools');
    const apps = {};
    for (const t of tools) {
      const { ui, legacy } = uiURIs(t);
      for (const uri of [ui, legacy]) if (uri && !apps[uri]) apps[uri] = await c.readResource({ uri });
    }
    const out = { tools, apps };
    if (name === 'everything') {
      const result = await c.callTool({ name: 'get-resource-links', arguments: { count: LINK_COUNT } });
      const links = result.content.filter((x) => x.type === 'resource_link');
      const reads = [];
      for (const l of links) reads.push(await c.readResource({ uri: l.uri }));
      out.links = { links, reads };
    }
    return out;
  } finally {
    await c.close().catch(() => {});
  }
}

before(async () => {
  memTmp = await mkdtemp(path.join(tmpdir(), 'mcpgw-hosts-'));
  const names = Object.keys(UPSTREAMS);
  const seen = await Promise.all(names.map(observe));
  truth = Object.fromEntries(names.map((n, i) => [n, seen[i]]));
  // The test is only as good as its ground truth: fail loudly if a server
  // changed so much that some check would have nothing to check.
  for (const n of names) assert.ok(truth[n].tools.length > 0, `${n} listed no tools when spawned directly`);
  for (const n of ['basic', 'budget']) {
    assert.ok(Object.keys(truth[n].apps).length > 0, `${n} (an MCP Apps example) showed no _meta.ui.resourceUri when spawned directly`);
  }
  assert.equal(truth.everything.links.links.length, LINK_COUNT, 'everything get-resource-links (direct): link count');

  gw = new Client({ name: 'mcpgw-interop-hosts', version: '0.0.0' }, { capabilities: {} });
  await gw.connect(new StreamableHTTPClientTransport(new URL(HOSTS_URL)));
}, { timeout: 60_000 });

after(async () => {
  await gw?.close().catch(() => {});
  if (memTmp) await rm(memTmp, { recursive: true, force: true });
});

// ---------------------------------------------------------------- tests

test('one tools/list without a cursor holds every upstream\'s tools', { timeout: TEST_TIMEOUT }, async () => {
  const page = await gw.listTools();
  const got = page.tools.map((t) => t.name);
  const { missing, extra } = diffNames(got, expectedToolNames(truth));
  assert.ok(missing.length === 0 && extra.length === 0, describeListing('tools/list (one request, no cursor)', got, truth) + `\n  nextCursor: ${JSON.stringify(page.nextCursor)}`);
  assert.equal(got.length, new Set(got).size, `tools/list repeats names: ${got.join(', ')}`);
  // No upstream here paginates, so the whole catalog is one page and
  // nothing is left to fetch.
  assert.equal(page.nextCursor, undefined, 'tools/list holds every tool yet carries a nextCursor');
});

test('every tool on the route is its upstream\'s own, item for item, but for the prefixed name', { timeout: TEST_TIMEOUT }, async () => {
  const tools = await listAll(gw, 'listTools', 'tools');
  const byName = new Map(tools.map((t) => [t.name, t]));
  for (const [u, t] of Object.entries(truth)) {
    for (const want of t.tools) {
      const name = prefixed(u, want.name);
      const got = byName.get(name);
      assert.ok(got, `${name} is not on the route (all pages of tools/list)`);
      // ui:// URIs are unique on this route, so they stay as the upstream wrote them.
      assert.deepEqual({ ...got, name: want.name }, want, `${name} differs from ${u}'s own ${want.name}`);
    }
  }
  assert.equal(tools.length, expectedToolNames(truth).length, `the route lists tools no upstream has: ${diffNames(tools.map((t) => t.name), expectedToolNames(truth)).extra}`);
});

test('the Inspector CLI\'s tools/list shows every upstream\'s tools', { timeout: TEST_TIMEOUT }, async () => {
  // inspector-cli 1.0.3 looks for its package.json at "../package.json"
  // relative to the working directory but imports it relative to its module,
  // so it runs only from a directory one below a package.json: its own build/.
  const pkg = path.join(MODULES, 'inspector-cli');
  let stdout;
  try {
    ({ stdout } = await promisify(execFile)(
      process.execPath,
      [path.join(pkg, 'build', 'cli.js'), '--cli', HOSTS_URL, '--transport', 'http', '--method', 'tools/list'],
      { cwd: path.join(pkg, 'build'), timeout: 20_000, maxBuffer: 16 << 20 },
    ));
  } catch (e) {
    assert.fail(`mcp-inspector-cli --cli ${HOSTS_URL} --transport http --method tools/list failed (${e.code ?? e.signal}): ${e.stderr || e.message}`);
  }
  let result;
  try {
    result = JSON.parse(stdout);
  } catch {
    assert.fail(`the Inspector CLI printed no JSON result: ${stdout.slice(0, 500)}`);
  }
  assert.ok(Array.isArray(result.tools), `the Inspector CLI's result has no tools array: ${stdout.slice(0, 500)}`);
  const got = result.tools.map((t) => t.name);
  const { missing, extra } = diffNames(got, expectedToolNames(truth));
  assert.ok(missing.length === 0 && extra.length === 0, describeListing('the Inspector CLI\'s tools/list', got, truth));
});

test('every _meta.ui.resourceUri is a ui:// URI that resources/read answers with the MCP App document', { timeout: TEST_TIMEOUT }, async () => {
  const tools = await listAll(gw, 'listTools', 'tools');
  // Which tools show an app is the upstreams' word, not the gateway's.
  const wantApps = Object.entries(truth).flatMap(([u, t]) => t.tools.filter((x) => uiURIs(x).ui).map((x) => [u, x]));
  const shown = tools.filter((t) => uiURIs(t).ui || uiURIs(t).legacy).map((t) => t.name).sort();
  assert.deepEqual(shown, wantApps.map(([u, x]) => prefixed(u, x.name)).sort(), 'the tools that show an app resource');

  const problems = [];
  for (const [u, want] of wantApps) {
    const name = prefixed(u, want.name);
    const tool = tools.find((t) => t.name === name);
    const { ui, legacy } = uiURIs(tool);
    if (!ui.startsWith('ui://')) problems.push(`${name}: _meta.ui.resourceUri ${JSON.stringify(ui)} is not a ui:// URI (${u} wrote ${JSON.stringify(uiURIs(want).ui)})`);
    if (uiURIs(want).legacy !== undefined && legacy !== ui) problems.push(`${name}: _meta["ui/resourceUri"] ${JSON.stringify(legacy)} is not _meta.ui.resourceUri ${JSON.stringify(ui)}`);
    let read;
    try {
      read = await gw.readResource({ uri: ui });
    } catch (e) {
      problems.push(`${name}: resources/read ${JSON.stringify(ui)} failed: ${errText(e)}`);
      continue;
    }
    const doc = truth[u].apps[uiURIs(want).ui].contents[0];
    if (read.contents.length !== 1) problems.push(`${name}: resources/read ${ui} returned ${read.contents.length} contents, ${u} itself 1`);
    const c = read.contents[0] || {};
    if (c.uri !== ui) problems.push(`${name}: resources/read ${ui} answered for uri ${JSON.stringify(c.uri)}`);
    if (c.mimeType !== APP_MIME) problems.push(`${name}: resources/read ${ui} has mimeType ${JSON.stringify(c.mimeType)}, want ${APP_MIME}`);
    if (!c.text || c.text !== doc.text) problems.push(`${name}: resources/read ${ui} text (${c.text?.length ?? 'none'} chars) is not ${u}'s document (${doc.text.length} chars)`);
  }
  assertNoProblems(problems, 'MCP App resources through the gateway');
});

test('resources/list names each app resource by the URI its tool shows', { timeout: TEST_TIMEOUT }, async () => {
  const tools = await listAll(gw, 'listTools', 'tools');
  const resources = await listAll(gw, 'listResources', 'resources');
  const problems = [];
  for (const t of tools) {
    const { ui } = uiURIs(t);
    if (!ui) continue;
    const r = resources.find((x) => x.uri === ui);
    if (!r) problems.push(`${t.name} shows ${ui}; resources/list has ${JSON.stringify(resources.filter((x) => x.uri.includes('ui://')).map((x) => x.uri))}`);
    else if (r.mimeType !== APP_MIME) problems.push(`${ui}: listed with mimeType ${JSON.stringify(r.mimeType)}, want ${APP_MIME}`);
  }
  assertNoProblems(problems, 'app resources in resources/list (all pages)');
});

test('every resource_link from everything\'s get-resource-links reads through the gateway', { timeout: TEST_TIMEOUT }, async () => {
  const result = await gw.callTool({ name: prefixed('everything', 'get-resource-links'), arguments: { count: LINK_COUNT } });
  assert.ok(!result.isError, `everything__get-resource-links returned isError: ${JSON.stringify(result)}`);
  const links = result.content.filter((x) => x.type === 'resource_link');
  const direct = truth.everything.links;
  assert.deepEqual(links.map((l) => l.name), direct.links.map((l) => l.name), 'the resource_link items (by name) the gateway passed on');

  const problems = [];
  for (const [i, link] of links.entries()) {
    let read;
    try {
      read = await gw.readResource({ uri: link.uri });
    } catch (e) {
      problems.push(`${link.uri} (${link.name}): resources/read failed: ${errText(e)}`);
      continue;
    }
    const want = direct.reads[i].contents;
    if (read.contents.length === 0) {
      problems.push(`${link.uri}: resources/read returned no contents`);
      continue;
    }
    for (const [j, c] of read.contents.entries()) {
      if (c.uri !== link.uri) problems.push(`${link.uri}: contents[${j}].uri is ${JSON.stringify(c.uri)}, not the URI the link showed`);
      const body = payloadOf(c);
      if (!body) problems.push(`${link.uri}: contents[${j}] is empty`);
      else if (!want[j] || untimed(body) !== untimed(payloadOf(want[j]))) {
        problems.push(`${link.uri}: contents[${j}] ${JSON.stringify(body)} is not what everything serves for ${direct.links[i].uri}: ${JSON.stringify(want[j] && payloadOf(want[j]))}`);
      }
    }
  }
  assertNoProblems(problems, `resource_link URIs of everything__get-resource-links (${links.length} links) that do not read through the gateway`);
});

test('an MCP App tool called by its bare name works', { timeout: TEST_TIMEOUT }, async () => {
  // An App's callServerTool names its server's tool as the server does
  // ("get-time"), not as the route prefixes it. These names are unique on
  // the route.
  const apps = Object.entries(truth).flatMap(([u, t]) => t.tools.filter((x) => uiURIs(x).ui).map((x) => [u, x.name]));
  assert.ok(apps.length >= 2, `MCP App tools on the route: ${JSON.stringify(apps)}`);
  await listAll(gw, 'listTools', 'tools'); // the SDK checks structuredContent against outputSchema for listed names
  const problems = [];
  for (const [u, bare] of apps) {
    // The prefixed call is the control: it works today.
    const ref = await gw.callTool({ name: prefixed(u, bare), arguments: {} });
    assert.ok(!ref.isError, `${prefixed(u, bare)} returned isError: ${JSON.stringify(ref).slice(0, 500)}`);
    let got;
    try {
      got = await gw.callTool({ name: bare, arguments: {} });
    } catch (e) {
      problems.push(`tools/call ${JSON.stringify(bare)} (${u}'s own name for ${prefixed(u, bare)}) failed: ${errText(e)}`);
      continue;
    }
    if (got.isError) {
      problems.push(`tools/call ${JSON.stringify(bare)} returned isError: ${JSON.stringify(got.content).slice(0, 300)}`);
      continue;
    }
    // Values change from call to call (the time, generated history); the structure does not.
    if (JSON.stringify(shapeOf(got)) !== JSON.stringify(shapeOf(ref))) {
      problems.push(`tools/call ${bare}: result is shaped ${JSON.stringify(shapeOf(got)).slice(0, 300)}, ${prefixed(u, bare)}'s ${JSON.stringify(shapeOf(ref)).slice(0, 300)}`);
    }
    if (bare === 'get-time') {
      const age = Math.abs(Date.now() - Date.parse(got.structuredContent?.time));
      if (!(age < 60_000)) problems.push(`get-time: structuredContent.time ${JSON.stringify(got.structuredContent?.time)} is not the current time`);
    }
  }
  assertNoProblems(problems, 'MCP App tools called by their bare names');
});
