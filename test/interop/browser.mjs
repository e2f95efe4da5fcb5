// A scripted browser for the sign-in tests: fetch with a cookie jar per
// origin that follows redirects by hand, fills in the test OP's login form
// (test/idp) with its user's name and password, and answers the gateway's
// consent form (docs/login.md: hidden request and csrf, a decision button
// allow or deny). It stops at the first URL stopAt(url) holds for — a
// native client's redirect URI — without requesting it, or at a page that
// is neither form.
//
// Run as a program (node browser.mjs URL), it is the "browser" mcp-remote
// opens (BROWSER=a wrapper of it): it follows URL to the end, mcp-remote's
// own callback page included, as LOGIN_USER / LOGIN_PASSWORD, and writes
// the last page's status and URL to LOGIN_TRACE when set.
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';

const decode = (s) =>
  s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)))
    .replace(/&#x([0-9a-f]+);/gi, (_, n) => String.fromCharCode(parseInt(n, 16)))
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/** attrs parses one tag's attributes (name → value, entities decoded). */
function attrs(tag) {
  const out = {};
  for (const m of tag.matchAll(/([a-zA-Z_:-]+)\s*=\s*("([^"]*)"|'([^']*)')/g)) out[m[1].toLowerCase()] = decode(m[3] ?? m[4] ?? '');
  return out;
}

/** forms lists the page's forms: action, method, hidden inputs, buttons. */
export function forms(html) {
  const out = [];
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    const a = attrs(m[1]);
    const hidden = {};
    const buttons = [];
    for (const t of m[2].matchAll(/<(input|button)\b([^>]*)>/gi)) {
      const i = attrs(t[2]);
      if (t[1].toLowerCase() === 'input' && (i.type ?? '').toLowerCase() === 'hidden' && i.name) hidden[i.name] = i.value ?? '';
      else if (i.name && (t[1].toLowerCase() === 'button' || (i.type ?? '').toLowerCase() === 'submit')) buttons.push({ name: i.name, value: i.value ?? '' });
    }
    out.push({ action: a.action ?? '', method: (a.method ?? 'get').toLowerCase(), hidden, buttons, html: m[2] });
  }
  return out;
}

export class Browser {
  /**
   * @param {string} user the OP username; the password is `password` or pw-USER
   * @param {{password?: string, decision?: 'allow'|'deny'}} [opts]
   */
  constructor(user, opts = {}) {
    this.user = user;
    this.password = opts.password ?? `pw-${user}`;
    this.decision = opts.decision ?? 'allow';
    this.jar = new Map(); // origin → Map(name → value)
    this.logins = 0; // OP login forms filled
    this.consents = 0; // gateway consent forms answered
    this.visited = []; // every URL requested
  }

  cookies(origin) {
    const c = this.jar.get(origin);
    return c ? [...c].map(([k, v]) => `${k}=${v}`).join('; ') : '';
  }

  keep(origin, res) {
    for (const line of res.headers.getSetCookie?.() ?? []) {
      const [pair, ...attrsList] = line.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const expired = attrsList.some((a) => /^\s*max-age\s*=\s*-?0*$|^\s*max-age\s*=\s*-/i.test(a));
      if (!this.jar.has(origin)) this.jar.set(origin, new Map());
      if (expired || value === '') this.jar.get(origin).delete(name);
      else this.jar.get(origin).set(name, value);
    }
  }

  /** request sends one request with this browser's cookies (no redirects followed). */
  async request(url, init = {}) {
    const origin = new URL(url).origin;
    const headers = { ...(init.headers ?? {}) };
    const c = this.cookies(origin);
    if (c) headers.Cookie = c;
    this.visited.push(url);
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    this.keep(origin, res);
    return res;
  }

  /**
   * visit opens url and goes on as a user would: redirects, the OP's login
   * form, the gateway's consent form. It resolves to {url, status, body}:
   * the URL stopAt stopped at (status 0), or the last page.
   */
  async visit(url, stopAt = () => false, init = {}) {
    for (let i = 0; i < 30; i++) {
      if (stopAt(new URL(url))) return { url, status: 0, body: '' };
      const res = await this.request(url, init);
      init = {};
      const loc = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && loc) {
        url = new URL(loc, url).toString();
        continue;
      }
      const body = await res.text();
      const next = this.answer(url, body);
      if (!next) return { url, status: res.status, body };
      [url, init] = next;
    }
    throw new Error(`more than 30 steps from ${url}`);
  }

  /** answer fills the form of a page it knows: [url, init] to go on, or null. */
  answer(url, body) {
    for (const f of forms(body)) {
      const action = new URL(f.action || url, url);
      if (action.pathname === '/login/username' && f.hidden.id !== undefined && f.method === 'post') {
        if (/<p style="color:red[^"]*">\s*[^<\s]/.test(body)) return null; // the OP refused the login
        this.logins++;
        const form = new URLSearchParams({ id: f.hidden.id, username: this.user, password: this.password });
        return [action.toString(), this.post(action, url, form)];
      }
      if (action.pathname.endsWith('/oauth/consent') && f.method === 'post') {
        const button = f.buttons.find((b) => b.name === 'decision' && b.value === this.decision);
        if (!button) throw new Error(`the consent form has no decision=${this.decision} button: ${f.html.slice(0, 400)}`);
        this.consents++;
        this.lastConsentPage = body;
        const form = new URLSearchParams({ ...f.hidden, decision: this.decision });
        return [action.toString(), this.post(action, url, form)];
      }
    }
    return null;
  }

  /** post is a form submission from the page at from (same-origin headers as a browser sends). */
  post(action, from, form) {
    const site = new URL(from).origin === action.origin ? 'same-origin' : 'cross-site';
    return {
      method: 'POST',
      body: form,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: new URL(from).origin, 'Sec-Fetch-Site': site, Referer: from },
    };
  }
}

// As a program: the browser mcp-remote opens.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const b = new Browser(process.env.LOGIN_USER ?? 'alice', { password: process.env.LOGIN_PASSWORD });
  b.visit(process.argv[2])
    .then((page) => {
      if (process.env.LOGIN_TRACE) fs.appendFileSync(process.env.LOGIN_TRACE, JSON.stringify({ url: page.url, status: page.status, logins: b.logins, consents: b.consents, visited: b.visited }) + '\n');
    })
    .catch((err) => {
      if (process.env.LOGIN_TRACE) fs.appendFileSync(process.env.LOGIN_TRACE, JSON.stringify({ error: String(err) }) + '\n');
      process.exitCode = 1;
    });
}
