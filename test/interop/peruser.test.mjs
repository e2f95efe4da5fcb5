// Per-user upstream OAuth with the official TypeScript SDK client: a
// client that declares elicitation.url calls a tool of an upstream that
// needs the user's own authorization, gets URLElicitationRequiredError
// (-32042) naming the gateway's start page, the "browser" (fetch with a
// cookie kept by hand) follows it through the real test OP's login form
// back to the gateway's callback, and the retried call reaches the
// upstream as that user; a second user gets an elicitation of their own.
//
// It starts the test OP (test/idp: MCPGW_IDP_BIN, which .ci/run builds;
// skipped without it unless MCPGW_REQUIRE_IDP=1), an upstream built on the
// SDK's server that verifies every bearer token against the OP's JWKS and
// publishes RFC 9728 metadata naming the OP, and its own mcpgw
// (MCPGW_BIN) with auth.per_user for that upstream.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ElicitationCompleteNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const bin = process.env.MCPGW_BIN;
const idpBin = process.env.MCPGW_IDP_BIN;
const skip = !idpBin && process.env.MCPGW_REQUIRE_IDP !== "1" ? "the test OP is not built (MCPGW_IDP_BIN; .ci/run sets it)" : false;
const appRedirect = "http://127.0.0.1/callback";
let dir, idp, issuer, upstream, upstreamURL, gw, base;
const subsSeen = [];
const downstream = {};

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// startIdP runs the OP with cfg and resolves to its issuer.
function startIdP(cfg) {
  const file = path.join(dir, "idp.json");
  fs.writeFileSync(file, JSON.stringify(cfg));
  idp = spawn(idpBin, ["-addr", "127.0.0.1:0", "-config", file, "-exit-on-eof"], { stdio: ["pipe", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: idp.stdout });
    rl.once("line", (line) => resolve(JSON.parse(line).issuer));
    idp.once("exit", (code) => reject(new Error(`the test OP exited (${code})`)));
  });
}

// verify checks an RS256 JWT against the OP's JWKS, its iss, exp and aud.
async function verify(token, audience) {
  const [h, p, sig] = token.split(".");
  const header = JSON.parse(Buffer.from(h, "base64url"));
  const { keys } = await (await fetch(`${issuer}keys`)).json();
  const jwk = keys.find((k) => k.kid === header.kid);
  if (!jwk || header.alg !== "RS256") throw new Error("unknown key or algorithm");
  const ok = crypto.verify("sha256", Buffer.from(`${h}.${p}`), crypto.createPublicKey({ key: jwk, format: "jwk" }), Buffer.from(sig, "base64url"));
  const claims = JSON.parse(Buffer.from(p, "base64url"));
  const aud = [].concat(claims.aud);
  if (!ok || claims.iss !== issuer || claims.exp * 1000 < Date.now() || !aud.includes(audience)) throw new Error("token refused");
  return claims;
}

// The upstream: whoami names the verified token's user.
function startUpstream() {
  const srv = http.createServer(async (req, res) => {
    if (req.url.startsWith("/.well-known/oauth-protected-resource")) {
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ resource: upstreamURL, authorization_servers: [issuer] }));
      return;
    }
    let claims;
    try {
      claims = await verify((req.headers.authorization ?? "").replace(/^Bearer /, ""), "mcpgw");
    } catch {
      res.writeHead(401, { "WWW-Authenticate": `Bearer resource_metadata="${new URL(upstreamURL).origin}/.well-known/oauth-protected-resource/mcp"` });
      res.end();
      return;
    }
    subsSeen.push(claims.sub);
    const server = new McpServer({ name: "protected", version: "1.0.0" });
    server.registerTool("whoami", { description: "who the token is for" }, async () => ({ content: [{ type: "text", text: claims.sub }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  return new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve(srv)));
}

// follow walks a redirect chain by hand (fetch's redirect: "manual"),
// keeping the gateway's cookie as a browser would, until stop(url) holds
// or a page is reached; it returns that URL, or the final response.
async function follow(url, jar, stop, init = {}) {
  for (let i = 0; i < 20; i++) {
    if (stop?.(url)) return { url };
    const headers = { ...(init.headers ?? {}) };
    const origin = new URL(url).origin;
    if (jar[origin]) headers.Cookie = jar[origin];
    const res = await fetch(url, { ...init, headers, redirect: "manual" });
    const set = res.headers.getSetCookie?.() ?? [];
    for (const c of set) jar[origin] = c.split(";")[0];
    const loc = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && loc) {
      url = new URL(loc, url).toString();
      init = {};
      continue;
    }
    return { url, res, body: await res.text() };
  }
  throw new Error("too many redirects");
}

// login fills the OP's login form on the page at url and follows the
// redirects until stop.
async function login(url, jar, user, stop) {
  const page = await follow(url, jar, stop);
  const m = /name="id" value="([^"]+)"/.exec(page.body ?? "");
  assert.ok(m, `the OP's login form, got ${page.res?.status}: ${String(page.body).slice(0, 300)}`);
  const form = new URLSearchParams({ id: m[1], username: user, password: `pw-${user}` });
  return follow(`${issuer}login/username`, jar, stop, { method: "POST", body: form, headers: { "Content-Type": "application/x-www-form-urlencoded" } });
}

// signIn gets user's downstream token (the app's own client at the OP).
async function signIn(user) {
  const verifier = crypto.randomBytes(32).toString("base64url");
  const challenge = crypto.createHash("sha256").update(verifier).digest("base64url");
  const auth = `${issuer}auth?` + new URLSearchParams({ client_id: "mcp-app", redirect_uri: appRedirect, response_type: "code", scope: "openid", state: "s", code_challenge: challenge, code_challenge_method: "S256" });
  const { url } = await login(auth, {}, user, (u) => u.startsWith(appRedirect));
  const code = new URL(url).searchParams.get("code");
  const res = await fetch(`${issuer}oauth/token`, {
    method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "authorization_code", code, code_verifier: verifier, client_id: "mcp-app", redirect_uri: appRedirect }),
  });
  return (await res.json()).access_token;
}

before(async () => {
  if (skip) return;
  assert.ok(bin, "MCPGW_BIN must name the mcpgw binary (run.sh sets it)");
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcpgw-peruser-"));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  issuer = await startIdP({
    users: [{ id: "alice", username: "alice", password: "pw-alice" }, { id: "bob", username: "bob", password: "pw-bob" }],
    clients: [
      { id: "mcp-app", type: "native", redirect_uris: [appRedirect] },
      { id: "mcpgw", type: "web", secret: "interop-peruser-secret", redirect_uris: [`${base}/oauth/upstream/gh/callback`] },
    ],
  });
  upstream = await startUpstream();
  upstreamURL = `http://127.0.0.1:${upstream.address().port}/mcp`;
  const keys = path.join(dir, "keys");
  fs.writeFileSync(keys, crypto.randomBytes(32).toString("base64") + "\n");
  const config = path.join(dir, "gateway.yaml");
  fs.writeFileSync(config, [
    `listen: 127.0.0.1:${port}`,
    `public_url: ${base}`,
    `auth: {oidc: {issuer: "${issuer}", audience: mcp-app}}`,
    `sessions: {key_file: "${keys}"}`,
    "policy: {default: allow}",
    "upstreams:",
    "  gh:",
    `    url: ${upstreamURL}`,
    "    auth:",
    "      per_user:",
    "        client_id: mcpgw",
    "        client_secret: interop-peruser-secret",
    `        issuer: "${issuer}"`,
    "        scopes: [openid]",
    `        store: {file: "${path.join(dir, "tokens.json")}"}`,
    "",
  ].join("\n"));
  gw = spawn(bin, ["run", "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  let logs = "";
  gw.stderr.on("data", (b) => { logs += b; });
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      if ((await fetch(`${base}/mcp`, { method: "POST" })).status === 401) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error("mcpgw did not start:\n" + logs);
    await new Promise((r) => setTimeout(r, 200));
  }
  downstream.alice = await signIn("alice");
  downstream.bob = await signIn("bob");
});

after(() => {
  gw?.kill("SIGTERM");
  upstream?.close();
  idp?.stdin.end(); // -exit-on-eof
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function connect(user) {
  const client = new Client({ name: `interop-${user}`, version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${downstream[user]}` } },
  }));
  return client;
}

// elicited calls whoami expecting -32042 and returns its elicitation.
async function elicited(client) {
  let err;
  try {
    await client.callTool({ name: "gh__whoami", arguments: {} });
  } catch (e) {
    err = e;
  }
  assert.equal(err?.code, -32042, `want URLElicitationRequiredError, got ${err}`);
  const [el] = err.data.elicitations;
  assert.equal(el.mode, "url");
  assert.ok(el.elicitationId);
  assert.ok(el.url.startsWith(`${base}/oauth/upstream/gh/start?t=`), el.url);
  return el;
}

// consent is the user's browser following the start link to the callback.
async function consent(link, user) {
  const jar = {};
  const done = await login(link, jar, user);
  assert.equal(done.res.status, 200, done.body);
  assert.match(done.body, /You can close this window/);
}

test("the SDK client declaring elicitation.url gets -32042, and after consent its call runs as its user", { skip }, async () => {
  const alice = await connect("alice");
  const completed = new Promise((resolve) => alice.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => resolve(n.params.elicitationId)));
  try {
    // Nothing to list until alice authorizes: tools/list elicits too.
    await assert.rejects(alice.listTools(), (err) => err?.code === -32042 && err.data?.elicitations?.[0]?.url?.includes("/oauth/upstream/gh/start?t="));
    const el = await elicited(alice);
    await consent(el.url, "alice");
    assert.equal(await Promise.race([completed, new Promise((r) => setTimeout(() => r("timeout"), 5000))]), el.elicitationId);
    const res = await alice.callTool({ name: "gh__whoami", arguments: {} });
    assert.deepEqual(res.content, [{ type: "text", text: "alice" }]);
    assert.ok((await alice.listTools()).tools.some((t) => t.name === "gh__whoami"), "after consent gh__whoami is listed");

    // bob gets his own elicitation, never alice's token.
    const bob = await connect("bob");
    try {
      const bel = await elicited(bob);
      assert.notEqual(bel.elicitationId, el.elicitationId);
      await consent(bel.url, "bob");
      const bres = await bob.callTool({ name: "gh__whoami", arguments: {} });
      assert.deepEqual(bres.content, [{ type: "text", text: "bob" }]);
    } finally {
      await bob.close();
    }
    assert.deepEqual([...new Set(subsSeen)].sort(), ["alice", "bob"]);
  } finally {
    await alice.close();
  }
});

test("a tampered start link is refused with a page, not a redirect", { skip }, async () => {
  const res = await fetch(`${base}/oauth/upstream/gh/start?t=AAAA`, { redirect: "manual" });
  assert.equal(res.status, 400);
  assert.match(await res.text(), /not valid/);
});
