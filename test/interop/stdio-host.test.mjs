// What a host that launches stdio servers sees through `mcpgw stdio`: the
// TypeScript SDK client spawns mcpgw as its stdio server and initializes at
// once, as hosts do, while mcpgw's own upstream (server-everything, a node
// child) is still starting. The first initialize answer must already carry
// that upstream's capabilities (resources.subscribe, logging) and its
// instructions: a session keeps them for its whole life.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.MCPGW_BIN;
const everything = path.join(here, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");

test("mcpgw stdio's first initialize carries a starting upstream's capabilities and instructions", { skip: !bin && "MCPGW_BIN is not set (run.sh sets it)" }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcpgw-stdio-host-"));
  const config = path.join(dir, "mcpgw.yaml");
  fs.writeFileSync(config, `upstreams:\n  everything:\n    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(everything)}, stdio]\n    startup_list_wait: 30s\n    startup_timeout: 30s\nroutes: [{path: /mcp}]\n`);
  const client = new Client({ name: "stdio-host", version: "1" });
  const transport = new StdioClientTransport({ command: bin, args: ["stdio", "-c", config], stderr: "ignore" });
  try {
    await client.connect(transport); // initialize, sent as soon as mcpgw is spawned
    const caps = client.getServerCapabilities();
    assert.ok(caps?.resources?.subscribe, `capabilities without resources.subscribe: ${JSON.stringify(caps)}`);
    assert.ok(caps?.logging, `capabilities without logging: ${JSON.stringify(caps)}`);
    const instructions = client.getInstructions() ?? "";
    assert.match(instructions, /everything/, `instructions: ${JSON.stringify(instructions)}`);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "everything__echo"), "everything__echo is listed");
  } finally {
    await client.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
