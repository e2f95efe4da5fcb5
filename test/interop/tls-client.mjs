// A TypeScript SDK client over https with its own client certificate, run
// by internal/gateway's TestTLSTypeScriptClients (Go makes the
// certificates and the gateway; this script is the real client).
//
//   MCPGW_URL=https://127.0.0.1:PORT/mcp MCPGW_CA=ca.pem \
//   MCPGW_CERT=client.crt MCPGW_KEY=client.key MCPGW_SDK=v1|v2 \
//   MCPGW_TOOL=secure__echo node tls-client.mjs
//
// It prints one JSON line: {"tools":[...],"echo":"..."} on success, or
// {"error":"..."} when the connection or a call fails (exit status 0 in
// both cases, so the Go test reads what happened), exit 1 on misuse.
//
// Node's fetch has no way to present a client certificate without the
// undici package, so the SDK's transport is given a fetch made on
// node:https, whose Agent carries the certificate, key and CA; the
// response body is streamed (the gateway may answer with SSE).

import https from 'node:https';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';

const need = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`tls-client.mjs: set ${name}`);
    process.exit(1);
  }
  return v;
};

const url = need('MCPGW_URL');
const tool = need('MCPGW_TOOL');
const sdk = process.env.MCPGW_SDK || 'v1';
const agent = new https.Agent({
  ca: readFileSync(need('MCPGW_CA')),
  cert: process.env.MCPGW_CERT ? readFileSync(process.env.MCPGW_CERT) : undefined,
  key: process.env.MCPGW_KEY ? readFileSync(process.env.MCPGW_KEY) : undefined,
  keepAlive: true,
});

// httpsFetch is the FetchLike both SDK versions accept.
function httpsFetch(input, init = {}) {
  return new Promise((resolve, reject) => {
    const target = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const headers = {};
    new Headers(init.headers).forEach((v, k) => { headers[k] = v; });
    const req = https.request(target, { method: init.method || 'GET', headers, agent }, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) {
        if (Array.isArray(v)) v.forEach((x) => h.append(k, x));
        else if (v !== undefined) h.set(k, v);
      }
      const empty = [204, 205, 304].includes(res.statusCode) || init.method === 'HEAD';
      if (empty) res.resume();
      resolve(new Response(empty ? null : Readable.toWeb(res), { status: res.statusCode, statusText: res.statusMessage, headers: h }));
    });
    req.on('error', reject);
    const signal = init.signal;
    if (signal) {
      if (signal.aborted) {
        req.destroy(signal.reason);
        return;
      }
      signal.addEventListener('abort', () => req.destroy(signal.reason), { once: true });
    }
    if (init.body == null) req.end();
    else req.end(typeof init.body === 'string' ? init.body : Buffer.from(init.body));
  });
}

async function loadSDK() {
  if (sdk === 'v2') {
    const m = await import('@modelcontextprotocol/client');
    return { Client: m.Client, Transport: m.StreamableHTTPClientTransport };
  }
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  return { Client, Transport: StreamableHTTPClientTransport };
}

const { Client, Transport } = await loadSDK();
const client = new Client({ name: `mcpgw-tls-${sdk}`, version: '0.0.0' }, { capabilities: {} });
try {
  await client.connect(new Transport(new URL(url), { fetch: httpsFetch }));
  const { tools } = await client.listTools(undefined, { timeout: 15_000 });
  const res = await client.callTool({ name: tool, arguments: { text: 'over-tls' } }, undefined, { timeout: 15_000 });
  const echo = (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
  console.log(JSON.stringify({ tools: tools.map((t) => t.name), echo, isError: !!res.isError }));
} catch (err) {
  const cause = err && err.cause ? `: ${err.cause.message || err.cause}` : '';
  console.log(JSON.stringify({ error: `${err && err.message ? err.message : err}${cause}` }));
} finally {
  await client.close().catch(() => {});
  agent.destroy();
}
