// The official TypeScript SDK client against mcpgw with authentication on:
// given a token it works through the gateway; without one it gets 401, and
// the challenge's resource_metadata URL leads to the RFC 9728 document.
//
// This file starts its own OIDC issuer (discovery + JWKS, an RSA key made
// here, RS256 tokens signed here) and its own mcpgw (MCPGW_BIN, built by
// run.sh) trusting it, in front of server-memory, so the other files keep
// their unauthenticated gateway.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { extractResourceMetadataUrl } from "@modelcontextprotocol/sdk/client/auth.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.MCPGW_BIN;
let gw, base, dir, issuer, issuerURL, token;

// A minimal OIDC issuer: discovery document and JWKS for one RSA key.
function startIssuer() {
  const { publicKey, privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: "jwk" }), kid: "k1", use: "sig", alg: "RS256" };
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      res.setHeader("Content-Type", "application/json");
      if (req.url === "/.well-known/openid-configuration") {
        res.end(JSON.stringify({
          issuer: issuerURL, jwks_uri: `${issuerURL}/jwks`, authorization_endpoint: `${issuerURL}/authorize`,
          token_endpoint: `${issuerURL}/token`, response_types_supported: ["code"], subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: ["RS256"],
        }));
      } else if (req.url === "/jwks") {
        res.end(JSON.stringify({ keys: [jwk] }));
      } else {
        res.statusCode = 404;
        res.end("{}");
      }
    });
    srv.listen(0, "127.0.0.1", () => {
      issuerURL = `http://127.0.0.1:${srv.address().port}`;
      resolve({ srv, privateKey });
    });
  });
}

function signJWT(privateKey, claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const input = `${b64({ alg: "RS256", typ: "JWT", kid: "k1" })}.${b64(claims)}`;
  return `${input}.${crypto.sign("sha256", Buffer.from(input), privateKey).toString("base64url")}`;
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

before(async () => {
  assert.ok(bin, "MCPGW_BIN must name the mcpgw binary (run.sh sets it)");
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcpgw-auth-"));
  issuer = await startIssuer();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const now = Math.floor(Date.now() / 1000);
  token = signJWT(issuer.privateKey, { iss: issuerURL, sub: "interop-user", aud: base, iat: now, exp: now + 600 });
  const memory = path.join(here, "node_modules/@modelcontextprotocol/server-memory/dist/index.js");
  const config = path.join(dir, "gateway.yaml");
  fs.writeFileSync(config, [
    `listen: 127.0.0.1:${port}`,
    `public_url: ${base}`,
    "upstreams:",
    "  memory:",
    `    command: [node, "${memory}"]`,
    `    env: {MEMORY_FILE_PATH: "${path.join(dir, "memory.jsonl")}"}`,
    "auth:",
    `  oidc: {issuer: "${issuerURL}"}`,
    "policy:",
    "  default: allow",
    "",
  ].join("\n"));
  gw = spawn(bin, ["run", "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  let logs = "";
  gw.stderr.on("data", (b) => { logs += b; });
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const res = await fetch(`${base}/mcp`, { method: "POST" });
      if (res.status === 401) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error("mcpgw with auth did not start:\n" + logs);
    await new Promise((r) => setTimeout(r, 200));
  }
});

after(() => {
  gw?.kill("SIGTERM");
  issuer?.srv.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test("with a token, the SDK client lists and calls through the gateway", async () => {
  const client = new Client({ name: "interop-auth", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "memory__read_graph"), "memory__read_graph is listed");
    const res = await client.callTool({ name: "memory__read_graph", arguments: {} });
    assert.notEqual(res.isError, true, JSON.stringify(res));
  } finally {
    await client.close();
  }
});

test("without a token, the SDK client is refused with 401", async () => {
  const client = new Client({ name: "interop-noauth", version: "1.0.0" });
  await assert.rejects(
    client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`))),
    (err) => /401|nauthori/i.test(String(err?.message ?? err)),
  );
});

test("the 401 challenge names the protected resource metadata, which describes the gateway", async () => {
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
  });
  assert.equal(res.status, 401);
  const metaURL = extractResourceMetadataUrl(res); // the SDK's own challenge parser
  assert.ok(metaURL, `no resource_metadata in WWW-Authenticate: ${res.headers.get("www-authenticate")}`);
  assert.equal(metaURL.origin, base);
  const meta = await (await fetch(metaURL)).json();
  assert.ok(String(meta.resource).startsWith(base), `resource ${meta.resource}`);
  assert.deepEqual(meta.authorization_servers, [issuerURL]);
  assert.deepEqual(meta.bearer_methods_supported, ["header"]);
});

test("a token for another audience is refused", async () => {
  const now = Math.floor(Date.now() / 1000);
  const other = signJWT(issuer.privateKey, { iss: issuerURL, sub: "u", aud: "https://other.example", iat: now, exp: now + 600 });
  const res = await fetch(`${base}/mcp`, { method: "POST", headers: { Authorization: `Bearer ${other}`, "Content-Type": "application/json" }, body: "{}" });
  assert.equal(res.status, 401);
  assert.match(res.headers.get("www-authenticate") ?? "", /invalid_token/);
});

test("a token in the query string is refused", async () => {
  const res = await fetch(`${base}/mcp?access_token=${token}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: "{}",
  });
  assert.ok(res.status === 400 || res.status === 401, `status ${res.status}`);
});
