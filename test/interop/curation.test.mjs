// Tool curation through real clients against real npm servers (issue 34's
// interop Must-show). Route /mcp/curated in gateway.yaml.tmpl shows
// server-everything and server-filesystem (the same children as /mcp) as an
// administrator chose: everything__echo renamed `say` with a new
// description, get-sum's `b` fixed to 10, get-resource-links' `count`
// defaulted to 5, fs__read_text_file renamed `read` with `tail` hidden,
// list_directory_with_sizes' `sortBy` defaulted to "size". /mcp is the same
// upstreams uncurated: each curated definition must equal the upstream's
// own there except exactly the curated members (golden), and each call must
// reach the upstream with what the administrator chose (its answer shows it).
// The TypeScript SDK client (v1) and the Inspector CLI both check this.
//
//   MCPGW_URL=http://127.0.0.1:PORT/mcp MCPGW_FS_DIR=DIR node --test test/interop/curation.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const INSPECTOR = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'inspector-cli');
const BASE = process.env.MCPGW_URL;
if (!BASE) throw new Error('set MCPGW_URL (e.g. http://127.0.0.1:18080/mcp); run.sh does');
const FS_DIR = process.env.MCPGW_FS_DIR;
if (!FS_DIR) throw new Error('set MCPGW_FS_DIR (the directory server-filesystem serves); run.sh does');
const CURATED_URL = BASE + '/curated';
const PLAIN_URL = BASE; // the same upstreams, uncurated
const TEST_TIMEOUT = 30_000;

// Curated name -> the upstream's name on the uncurated route.
const RENAMED = { say: 'everything__echo', read: 'fs__read_text_file' };
const DESCRIPTION = 'Repeat the given text.';

// A directory of two files whose name order and size order differ, for
// list_directory_with_sizes (sortBy "size" sorts by size, descending).
const SIZES_DIR = path.join(FS_DIR, 'curation-sizes');
const NOTE = path.join(FS_DIR, 'curation-note.txt');

let curated;
let plain;

async function connect(url) {
  const c = new Client({ name: 'mcpgw-interop-curation', version: '0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  return c;
}

before(async () => {
  fs.mkdirSync(SIZES_DIR, { recursive: true });
  fs.writeFileSync(path.join(SIZES_DIR, 'a-small.txt'), 'x');
  fs.writeFileSync(path.join(SIZES_DIR, 'b-big.txt'), 'y'.repeat(4000));
  fs.writeFileSync(NOTE, 'line one\nline two\nline three\n');
  curated = await connect(CURATED_URL);
  plain = await connect(PLAIN_URL);
});

after(async () => {
  await curated?.close();
  await plain?.close();
  fs.rmSync(SIZES_DIR, { recursive: true, force: true });
  fs.rmSync(NOTE, { force: true });
});

function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/** The refusal a call gets: a JSON-RPC error ({code, message}) or an isError result ({message}). */
async function refusal(promise) {
  let r;
  try {
    r = await promise;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
  assert.ok(r.isError, `expected a refusal, got a result: ${JSON.stringify(r).slice(0, 400)}`);
  return { message: text(r) };
}

/** Every tool of everything and fs on the uncurated route, by name. */
async function upstreamTools() {
  const { tools } = await plain.listTools();
  return new Map(tools.filter((t) => /^(everything|fs)__/.test(t.name)).map((t) => [t.name, t]));
}

function clone(v) {
  return JSON.parse(JSON.stringify(v));
}

/** v with the members at the given paths (arrays of keys) deleted. */
function without(v, ...paths) {
  const out = clone(v);
  for (const p of paths) {
    let o = out;
    for (const k of p.slice(0, -1)) o = o?.[k];
    if (o) delete o[p.at(-1)];
  }
  return out;
}

// The members each curation rule changes, as paths into a tool definition.
const CURATED_MEMBERS = {
  say: [['name'], ['description']],
  'everything__get-sum': [['inputSchema', 'properties', 'b'], ['inputSchema', 'required']],
  'everything__get-resource-links': [['inputSchema', 'properties', 'count', 'default']],
  read: [['name'], ['inputSchema', 'properties', 'tail']],
  fs__list_directory_with_sizes: [['inputSchema', 'properties', 'sortBy', 'default']],
};

/**
 * Checks a curated tools/list (from the SDK client or the Inspector CLI)
 * against the upstream's own definitions: names, the curated members, and
 * every other member identical, in the same order (compared as JSON text, so
 * a member moved or re-encoded would show).
 */
function checkCuratedList(tools, upstream) {
  const byName = new Map(tools.map((t) => [t.name, t]));
  assert.equal(byName.size, tools.length, 'tools/list names a tool twice');
  const expected = [...upstream.keys()].map((n) => Object.entries(RENAMED).find(([, old]) => old === n)?.[0] ?? n);
  assert.deepEqual([...byName.keys()].sort(), expected.sort(), 'the curated route lists the upstreams\' tools under the curated names only');
  for (const old of Object.values(RENAMED)) assert.ok(!byName.has(old), `${old} is still listed under its old name`);

  for (const [name, t] of byName) {
    const orig = upstream.get(RENAMED[name] ?? name);
    const members = CURATED_MEMBERS[name] ?? [];
    assert.equal(
      JSON.stringify(without(t, ...members)),
      JSON.stringify(without(orig, ...members)),
      `${name}: the definition differs from the upstream's ${orig.name} beyond the curated members ${JSON.stringify(members)}`,
    );
    // Members no rule touches, named explicitly: outputSchema, annotations, _meta, title.
    for (const k of ['outputSchema', 'annotations', '_meta', 'title', 'execution']) {
      assert.deepEqual(t[k], orig[k], `${name}.${k} is not the upstream's`);
    }
  }

  // The curated members themselves.
  const say = byName.get('say');
  assert.equal(say.description, DESCRIPTION);
  assert.notEqual(upstream.get('everything__echo').description, DESCRIPTION);

  const sum = byName.get('everything__get-sum');
  assert.ok(!('b' in sum.inputSchema.properties), 'the fixed parameter b is still in the schema');
  assert.deepEqual(sum.inputSchema.required, upstream.get('everything__get-sum').inputSchema.required.filter((p) => p !== 'b'));
  assert.deepEqual(sum.inputSchema.required, ['a']);

  const links = byName.get('everything__get-resource-links');
  assert.equal(links.inputSchema.properties.count.default, 5);
  assert.equal(upstream.get('everything__get-resource-links').inputSchema.properties.count.default, 3);

  const read = byName.get('read');
  assert.ok(!('tail' in read.inputSchema.properties), 'the hidden parameter tail is still in the schema');
  assert.ok('head' in read.inputSchema.properties);
  assert.ok(read.outputSchema, 'server-filesystem\'s read_text_file has an outputSchema; the curated one lost it');

  const sizes = byName.get('fs__list_directory_with_sizes');
  assert.equal(sizes.inputSchema.properties.sortBy.default, 'size');
  assert.equal(upstream.get('fs__list_directory_with_sizes').inputSchema.properties.sortBy.default, 'name');
}

test('the SDK client lists curated names only; every definition is the upstream\'s but for the curated members', { timeout: TEST_TIMEOUT }, async () => {
  const upstream = await upstreamTools();
  assert.ok(upstream.has('everything__echo') && upstream.has('fs__read_text_file'), `uncurated route: ${[...upstream.keys()]}`);
  const { tools, nextCursor } = await curated.listTools();
  assert.equal(nextCursor, undefined);
  checkCuratedList(tools, upstream);
});

test('a renamed tool is called by its new name only', { timeout: TEST_TIMEOUT }, async () => {
  const r = await curated.callTool({ name: 'say', arguments: { message: 'curated hello' } });
  assert.ok(!r.isError && text(r).includes('curated hello'), `say: ${JSON.stringify(r)}`);
  for (const old of ['everything__echo', 'echo']) {
    const ref = await refusal(curated.callTool({ name: old, arguments: { message: 'old name' } }));
    assert.ok(!ref.message.includes('old name'), `${old} reached the upstream: ${ref.message}`);
  }

  const read = await curated.callTool({ name: 'read', arguments: { path: NOTE } });
  assert.ok(!read.isError && text(read).includes('line three'), `read: ${JSON.stringify(read)}`);
  for (const old of ['fs__read_text_file', 'read_text_file']) {
    const ref = await refusal(curated.callTool({ name: old, arguments: { path: NOTE } }));
    assert.ok(!ref.message.includes('line three'), `${old} reached the upstream: ${ref.message}`);
  }
});

test('a fixed parameter is applied on every call and refused when sent', { timeout: TEST_TIMEOUT }, async () => {
  for (const a of [5, 32]) {
    const r = await curated.callTool({ name: 'everything__get-sum', arguments: { a } });
    assert.ok(!r.isError, `get-sum {a:${a}}: ${JSON.stringify(r)}`);
    // server-everything answers "The sum of A and B is S.": it saw b = 10.
    assert.match(text(r), new RegExp(`\\b${a}\\b.*\\b10\\b.*\\b${a + 10}\\b`), `get-sum {a:${a}}: ${text(r)}`);
  }
  for (const args of [{ a: 5, b: 10 }, { a: 5, b: 1 }, { a: 5, B: 1 }]) {
    const ref = await refusal(curated.callTool({ name: 'everything__get-sum', arguments: args }));
    assert.equal(ref.code, -32602, `get-sum ${JSON.stringify(args)}: ${ref.message}`);
    assert.match(ref.message, /parameter "b" is fixed/i, `get-sum ${JSON.stringify(args)}: ${ref.message}`);
  }
});

test('a hidden parameter is refused when sent', { timeout: TEST_TIMEOUT }, async () => {
  for (const args of [{ path: NOTE, tail: 1 }, { path: NOTE, TAIL: 1 }]) {
    const ref = await refusal(curated.callTool({ name: 'read', arguments: args }));
    assert.equal(ref.code, -32602, `read ${JSON.stringify(args)}: ${ref.message}`);
    assert.match(ref.message, /parameter "tail" is hidden/i, `read ${JSON.stringify(args)}: ${ref.message}`);
  }
  // head is not curated and still works.
  const r = await curated.callTool({ name: 'read', arguments: { path: NOTE, head: 1 } });
  assert.ok(!r.isError && text(r).includes('line one') && !text(r).includes('line two'), `read head 1: ${JSON.stringify(r)}`);
});

test('defaults are applied when absent; a caller\'s own value wins', { timeout: TEST_TIMEOUT }, async () => {
  const links = async (args) => {
    const r = await curated.callTool({ name: 'everything__get-resource-links', arguments: args });
    assert.ok(!r.isError, `get-resource-links ${JSON.stringify(args)}: ${JSON.stringify(r)}`);
    return r.content.filter((c) => c.type === 'resource_link').length;
  };
  assert.equal(await links({}), 5, 'the gateway\'s default count 5 (the upstream\'s own is 3)');
  assert.equal(await links({ count: 2 }), 2);

  const order = async (args) => {
    const r = await curated.callTool({ name: 'fs__list_directory_with_sizes', arguments: { path: SIZES_DIR, ...args } });
    assert.ok(!r.isError, `list_directory_with_sizes ${JSON.stringify(args)}: ${JSON.stringify(r)}`);
    return [...text(r).matchAll(/\b([ab]-(?:small|big)\.txt)\b/g)].map((m) => m[1]);
  };
  assert.deepEqual(await order({}), ['b-big.txt', 'a-small.txt'], 'the gateway\'s default sortBy "size" (the upstream\'s own is "name")');
  assert.deepEqual(await order({ sortBy: 'name' }), ['a-small.txt', 'b-big.txt']);
});

// ---- raw bytes: the tools/list response as the gateway sent it, before any
// client parses it, so a member re-encoded, reordered or re-spaced shows.

/** The index just past the JSON value starting at (or after whitespace from) i. */
function valueEnd(s, i) {
  i = skipWS(s, i);
  const c = s[i];
  if (c === '"') {
    for (i++; s[i] !== '"'; i++) if (s[i] === '\\') i++;
    return i + 1;
  }
  if (c === '{' || c === '[') {
    let depth = 0;
    for (; i < s.length; i++) {
      const d = s[i];
      if (d === '"') { i = valueEnd(s, i) - 1; continue; }
      if (d === '{' || d === '[') depth++;
      if (d === '}' || d === ']') { depth--; if (depth === 0) return i + 1; }
    }
    throw new Error('unterminated JSON value');
  }
  while (i < s.length && !/[\s,\]}]/.test(s[i])) i++;
  return i;
}

function skipWS(s, i) {
  while (/\s/.test(s[i])) i++;
  return i;
}

/** The members of the object whose text is obj: [key, raw value text], in order. */
function rawMembers(obj) {
  const out = [];
  let i = skipWS(obj, 0);
  assert.equal(obj[i], '{', `not an object: ${obj.slice(0, 80)}`);
  i = skipWS(obj, i + 1);
  while (obj[i] !== '}') {
    const kEnd = valueEnd(obj, i);
    const key = JSON.parse(obj.slice(i, kEnd));
    i = skipWS(obj, kEnd);
    assert.equal(obj[i], ':');
    const vStart = skipWS(obj, i + 1);
    const vEnd = valueEnd(obj, vStart);
    out.push([key, obj.slice(vStart, vEnd)]);
    i = skipWS(obj, vEnd);
    if (obj[i] === ',') i = skipWS(obj, i + 1);
  }
  return out;
}

function rawElements(arr) {
  const out = [];
  let i = skipWS(arr, 0);
  assert.equal(arr[i], '[');
  i = skipWS(arr, i + 1);
  while (arr[i] !== ']') {
    const end = valueEnd(arr, i);
    out.push(arr.slice(i, end));
    i = skipWS(arr, end);
    if (arr[i] === ',') i = skipWS(arr, i + 1);
  }
  return out;
}

function rawGet(obj, key) {
  const m = rawMembers(obj).find(([k]) => k === key);
  assert.ok(m, `no member ${key} in ${obj.slice(0, 120)}`);
  return m[1];
}

/** The raw text of each tool definition in url's tools/list answer, by name. */
async function rawToolsList(url) {
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
  const post = async (body, extra = {}) => {
    const res = await fetch(url, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
    return { res, text: await res.text() };
  };
  const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mcpgw-interop-curation-raw', version: '0' } } });
  assert.equal(init.res.status, 200, `initialize: ${init.text}`);
  const sid = init.res.headers.get('mcp-session-id');
  const version = { 'MCP-Protocol-Version': '2025-11-25', ...(sid ? { 'Mcp-Session-Id': sid } : {}) };
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, version);
  const list = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, version);
  assert.equal(list.res.status, 200, `tools/list: ${list.text}`);
  if (sid) await fetch(url, { method: 'DELETE', headers: version });
  // A JSON body, or an event stream whose data line is the answer.
  let msg = list.text;
  if ((list.res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    msg = list.text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).find((d) => d.includes('"id":2'));
    assert.ok(msg, `no answer in the event stream: ${list.text.slice(0, 400)}`);
  }
  const tools = rawElements(rawGet(rawGet(msg, 'result'), 'tools'));
  return new Map(tools.map((t) => [JSON.parse(rawGet(t, 'name')), t]));
}

/**
 * Asserts that the raw JSON texts a and b are byte-identical except at the
 * given member paths: members on no path are compared as text, in order;
 * members on a path's way are descended into.
 */
function assertRawEqualExcept(a, b, paths, where) {
  if (paths.length === 0) {
    assert.equal(a, b, `${where}: not byte-identical`);
    return;
  }
  const skip = new Set(paths.filter((p) => p.length === 1).map((p) => p[0]));
  const am = rawMembers(a).filter(([k]) => !skip.has(k));
  const bm = rawMembers(b).filter(([k]) => !skip.has(k));
  assert.deepEqual(am.map(([k]) => k), bm.map(([k]) => k), `${where}: members differ or moved`);
  for (let i = 0; i < am.length; i++) {
    const k = am[i][0];
    const deeper = paths.filter((p) => p.length > 1 && p[0] === k).map((p) => p.slice(1));
    assertRawEqualExcept(am[i][1], bm[i][1], deeper, `${where}.${k}`);
  }
}

test('raw bytes: every member the curation does not change is the upstream\'s, byte for byte', { timeout: TEST_TIMEOUT }, async () => {
  const cur = await rawToolsList(CURATED_URL);
  const up = await rawToolsList(PLAIN_URL);
  let compared = 0;
  for (const [name, t] of cur) {
    const orig = up.get(RENAMED[name] ?? name);
    assert.ok(orig, `${name} is not a tool of the uncurated route`);
    assertRawEqualExcept(t, orig, CURATED_MEMBERS[name] ?? [], name);
    compared++;
  }
  assert.ok(compared > 20, `compared ${compared} tools`);
});

/** Runs the Inspector CLI against url with args; returns {json} or {error: stderr}. */
async function inspector(url, args) {
  // inspector-cli 1.0.3 runs only from its own build/ directory (see hosts.test.mjs).
  let stdout;
  try {
    ({ stdout } = await promisify(execFile)(
      process.execPath,
      [path.join(INSPECTOR, 'build', 'cli.js'), '--cli', url, '--transport', 'http', ...args],
      { cwd: path.join(INSPECTOR, 'build'), timeout: 20_000, maxBuffer: 16 << 20 },
    ));
  } catch (e) {
    if (e.killed || e.signal) assert.fail(`mcp-inspector-cli ${args.join(' ')} was killed (${e.signal}): ${e.stderr}`);
    return { error: `${e.stderr}\n${e.stdout}` };
  }
  try {
    return { json: JSON.parse(stdout) };
  } catch {
    assert.fail(`the Inspector CLI printed no JSON: ${stdout.slice(0, 500)}`);
  }
}

async function inspectorOK(url, args) {
  const { json, error } = await inspector(url, args);
  assert.ok(json, `mcp-inspector-cli ${args.join(' ')} failed: ${error}`);
  return json;
}

test('the Inspector CLI lists the curated catalog and calls it', { timeout: 60_000 }, async () => {
  const listed = await inspectorOK(CURATED_URL, ['--method', 'tools/list']);
  const upstreamListed = await inspectorOK(PLAIN_URL, ['--method', 'tools/list']);
  const upstream = new Map(upstreamListed.tools.filter((t) => /^(everything|fs)__/.test(t.name)).map((t) => [t.name, t]));
  checkCuratedList(listed.tools, upstream);

  const say = await inspectorOK(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'say', '--tool-arg', 'message=from the inspector']);
  assert.ok(!say.isError && text(say).includes('from the inspector'), `say: ${JSON.stringify(say)}`);
  const old = await inspector(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'everything__echo', '--tool-arg', 'message=old name']);
  assert.ok(old.error || old.json.isError, `everything__echo by its old name: ${JSON.stringify(old)}`);
  assert.ok(!JSON.stringify(old).includes('Echo: old name'), `everything__echo by its old name reached the upstream: ${JSON.stringify(old)}`);

  const sum = await inspectorOK(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'everything__get-sum', '--tool-arg', 'a=7']);
  assert.ok(!sum.isError && /\b17\b/.test(text(sum)), `get-sum {a:7}: ${JSON.stringify(sum)}`);
  const sent = await inspector(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'everything__get-sum', '--tool-arg', 'a=7', '--tool-arg', 'b=1']);
  assert.ok(sent.error, `get-sum {a:7, b:1} was not refused: ${JSON.stringify(sent)}`);
  assert.match(sent.error, /parameter "b" is fixed/i);

  const read = await inspectorOK(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'read', '--tool-arg', `path=${NOTE}`]);
  assert.ok(!read.isError && text(read).includes('line two'), `read: ${JSON.stringify(read)}`);
  const hidden = await inspector(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'read', '--tool-arg', `path=${NOTE}`, '--tool-arg', 'tail=1']);
  assert.ok(hidden.error, `read with tail was not refused: ${JSON.stringify(hidden)}`);
  assert.match(hidden.error, /parameter "tail" is hidden/i);

  const links = await inspectorOK(CURATED_URL, ['--method', 'tools/call', '--tool-name', 'everything__get-resource-links']);
  assert.equal(links.content.filter((c) => c.type === 'resource_link').length, 5, `get-resource-links {}: ${JSON.stringify(links).slice(0, 400)}`);
});
