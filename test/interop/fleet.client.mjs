// The TypeScript SDK client of the fleet test (test/fleet, run by its Go
// test with the HAProxy URL): one session through a round-robin balancer
// in front of three mcpgw replicas. It calls up__whoami 12 times (each
// answer names the replica whose upstream connection ran it), lists the
// tools, subscribes to the doc resource, touches it, and waits for the
// update on the SDK's GET stream. It prints one JSON line for the Go test
// to check; any failure exits non-zero.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
const t0 = Date.now();
const ms = {};
const mark = (k) => { ms[k] = Date.now() - t0; };
if (!url) {
  console.error('usage: node fleet.client.mjs URL');
  process.exit(2);
}
const client = new Client({ name: 'fleet-ts', version: '1' });
let updated;
const gotUpdate = new Promise((resolve) => {
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updated = n.params.uri;
    resolve();
  });
});
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
mark('connected');

const replicas = [];
for (let i = 0; i < 12; i++) {
  const r = await client.callTool({ name: 'up__whoami', arguments: {} });
  const text = r.content?.[0]?.text ?? '';
  if (r.isError || !text.startsWith('replica=')) throw new Error(`call ${i}: ${JSON.stringify(r)}`);
  replicas.push(text.slice('replica='.length));
}
mark('calls');
const tools = (await client.listTools()).tools.map((t) => t.name);
const doc = (await client.listResources()).resources.find((r) => r.uri.includes('doc'));
if (!doc) throw new Error('no doc resource listed');
// The SDK opens its GET stream after initialize; give it a moment to be
// held by a replica before the update is caused.
await new Promise((r) => setTimeout(r, 300));
await client.subscribeResource({ uri: doc.uri });
await client.callTool({ name: 'up__touch', arguments: {} });
mark('touched');
let timer;
await Promise.race([gotUpdate, new Promise((r) => { timer = setTimeout(r, 10000); })]);
clearTimeout(timer); // else it keeps node running
mark('updated');
await transport.terminateSession();
await client.close();
mark('closed');
console.log(JSON.stringify({ replicas, tools, updated: updated ?? '', ms }));
