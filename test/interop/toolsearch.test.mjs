// Search mode through real clients (issue 17's interop Must-show). Route
// /mcp/search in gateway.yaml.tmpl shows the three npm servers of /mcp
// (everything, fs, memory) as the gateway's two meta-tools; the TypeScript
// SDK client and the Inspector CLI each search, then call what they found,
// through mcpgw__call_tool and directly by name.
//
//   MCPGW_URL=http://127.0.0.1:PORT/mcp node --test test/interop/toolsearch.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const INSPECTOR = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'inspector-cli');
const BASE = process.env.MCPGW_URL;
if (!BASE) throw new Error('set MCPGW_URL (e.g. http://127.0.0.1:18080/mcp); run.sh does');
const SEARCH_URL = BASE + '/search';
const ALL_URL = BASE; // the same upstreams, every tool listed
const SEARCH = 'mcpgw__search_tools';
const CALL = 'mcpgw__call_tool';
const TEST_TIMEOUT = 30_000;

let search;
let all;

async function connect(url) {
  const c = new Client({ name: 'mcpgw-interop-toolsearch', version: '0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  return c;
}

before(async () => {
  search = await connect(SEARCH_URL);
  all = await connect(ALL_URL);
});

after(async () => {
  await search?.close();
  await all?.close();
});

/** The tools a search_tools result names, in rank order. */
function found(result) {
  assert.ok(!result.isError, `search_tools failed: ${JSON.stringify(result.content)}`);
  const sc = result.structuredContent;
  assert.ok(sc && Array.isArray(sc.tools), `search_tools has no structuredContent.tools: ${JSON.stringify(result).slice(0, 400)}`);
  return sc.tools;
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

test('tools/list in search mode is the two meta-tools, small and fixed', { timeout: TEST_TIMEOUT }, async () => {
  const { tools, nextCursor } = await search.listTools();
  assert.equal(nextCursor, undefined);
  assert.deepEqual(tools.map((t) => t.name).sort(), [CALL, SEARCH]);
  const bytes = JSON.stringify(tools).length;
  assert.ok(bytes < 4096, `the search route's tools/list is ${bytes} bytes`);
  const { tools: every } = await all.listTools();
  assert.ok(every.length > 20, `the same upstreams list ${every.length} tools on /mcp`);
});

test('the SDK client finds a tool by what it does and calls it, through call_tool and directly', { timeout: TEST_TIMEOUT }, async () => {
  const { tools: every } = await all.listTools();
  const names = new Set(every.map((t) => t.name));

  const hits = found(await search.callTool({ name: SEARCH, arguments: { query: 'echo back a message', limit: 5 } }));
  assert.ok(hits.length > 0 && hits.length <= 5, `limit 5 gave ${hits.length} results`);
  const echo = hits.find((t) => t.name === 'everything__echo');
  assert.ok(echo, `"echo back a message" did not find everything__echo in the top 5: ${hits.map((t) => t.name)}`);
  for (const h of hits) assert.ok(names.has(h.name), `search result ${h.name} is not a tool of the route's upstreams`);
  // What a search shows of a tool is what tools/list shows of it.
  assert.deepEqual(echo.inputSchema, every.find((t) => t.name === 'everything__echo').inputSchema);

  const via = await search.callTool({ name: CALL, arguments: { name: echo.name, arguments: { message: 'via call_tool' } } });
  assert.ok(!via.isError && text(via).includes('via call_tool'), `call_tool: ${JSON.stringify(via)}`);
  const direct = await search.callTool({ name: echo.name, arguments: { message: 'called directly' } });
  assert.ok(!direct.isError && text(direct).includes('called directly'), `direct call in search mode: ${JSON.stringify(direct)}`);

  const fsHits = found(await search.callTool({ name: SEARCH, arguments: { query: 'list the files in a directory', upstream: 'fs' } }));
  assert.ok(fsHits.length > 0 && fsHits.every((t) => t.name.startsWith('fs__')), `upstream filter fs: ${fsHits.map((t) => t.name)}`);
  assert.ok(fsHits.slice(0, 5).some((t) => t.name === 'fs__list_directory'), `"list the files in a directory" top 5: ${fsHits.map((t) => t.name)}`);
});

test('call_tool of a tool that does not exist is refused, naming it (the upstream\'s own answer)', { timeout: TEST_TIMEOUT }, async () => {
  let refused;
  try {
    const r = await search.callTool({ name: CALL, arguments: { name: 'everything__no_such_tool', arguments: {} } });
    refused = r.isError ? text(r) : undefined;
  } catch (e) {
    refused = e.message;
  }
  // The name resolves to everything, which is asked and refuses in its own
  // words, with its own name for the tool.
  assert.ok(refused && refused.includes('no_such_tool'), `refusal: ${refused}`);
});

/** Runs the Inspector CLI against url with args; returns its JSON output. */
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
    assert.fail(`mcp-inspector-cli ${args.join(' ')} failed (${e.code ?? e.signal}): ${e.stderr || e.message}`);
  }
  try {
    return JSON.parse(stdout);
  } catch {
    assert.fail(`the Inspector CLI printed no JSON: ${stdout.slice(0, 500)}`);
  }
}

test('the Inspector CLI searches, then calls what it found', { timeout: TEST_TIMEOUT }, async () => {
  const listed = await inspector(SEARCH_URL, ['--method', 'tools/list']);
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), [CALL, SEARCH]);

  const res = await inspector(SEARCH_URL, ['--method', 'tools/call', '--tool-name', SEARCH, '--tool-arg', 'query=add two numbers']);
  const hits = found(res);
  assert.ok(hits.slice(0, 5).some((t) => t.name === 'everything__get-sum'), `"add two numbers" top 5: ${hits.map((t) => t.name)}`);

  const sum = await inspector(SEARCH_URL, ['--method', 'tools/call', '--tool-name', CALL,
    '--tool-arg', 'name=everything__get-sum', '--tool-arg', 'arguments={"a":2,"b":3}']);
  assert.ok(!sum.isError && /\b5\b/.test(text(sum)), `call_tool everything__get-sum {a:2,b:3}: ${JSON.stringify(sum)}`);
});
