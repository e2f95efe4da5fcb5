// Preload that gives Node 20 the `fs.globSync` Node 22 added, for the pinned
// @modelcontextprotocol/conformance CLI, which does `import { globSync } from "fs"`.
//
// Usage: node --import ./globsync-preload.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js ...
//
// A builtin's ESM named exports are fixed the first time it is loaded, so adding a
// property to `fs` is not enough for a named import. This preload therefore
//   1. adds globSync to the CommonJS `fs` object (covers `fs.globSync` and the default import), and
//   2. registers a resolve hook that sends `fs`/`node:fs` imports from ESM code to a
//      small shim module that re-exports node:fs plus globSync.
// On a Node that already has fs.globSync it does nothing.
import { register, createRequire } from "node:module";

const require = createRequire(import.meta.url);
const fs = require("node:fs");
const path = require("node:path");

// Converts one path segment glob (`*`, `?`, `[...]`, `{a,b}`) into a RegExp.
function segmentRegExp(seg) {
  let re = "";
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i];
    if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else if (c === "[") {
      const j = seg.indexOf("]", i + 1);
      if (j < 0) {
        re += "\\[";
      } else {
        let cls = seg.slice(i + 1, j).replace(/\\/g, "\\\\");
        if (cls.startsWith("!")) cls = "^" + cls.slice(1);
        re += "[" + cls + "]";
        i = j;
      }
    } else if (c === "{") {
      const j = seg.indexOf("}", i + 1);
      if (j < 0) {
        re += "\\{";
      } else {
        const alts = seg.slice(i + 1, j).split(",").map((a) => segmentRegExp(a).source.slice(1, -1));
        re += "(?:" + alts.join("|") + ")";
        i = j;
      }
    } else re += c.replace(/[.+^$()|\\\]]/g, "\\$&");
  }
  return new RegExp("^" + re + "$");
}

const hasMagic = (seg) => /[*?[{]/.test(seg);

// Matches a list of path segments against a list of pattern segments (`**` = any depth).
function matchSegments(pat, parts, pi = 0, si = 0) {
  while (pi < pat.length) {
    const p = pat[pi];
    if (p === "**") {
      if (pi === pat.length - 1) return true;
      for (let k = si; k <= parts.length; k++) if (matchSegments(pat, parts, pi + 1, k)) return true;
      return false;
    }
    if (si >= parts.length) return false;
    if (!(hasMagic(p) ? segmentRegExp(p).test(parts[si]) : p === parts[si])) return false;
    pi++;
    si++;
  }
  return si === parts.length;
}

// Lists every entry below `root` as a path relative to it (forward slashes), without following symlinks.
function walk(root, rel, out) {
  let entries;
  try {
    entries = fs.readdirSync(rel ? path.join(root, rel) : root, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const r = rel ? rel + "/" + e.name : e.name;
    out.push(r);
    if (e.isDirectory()) walk(root, r, out);
  }
}

// globSync(pattern | pattern[], { cwd?, exclude? }) -> string[] of matches relative to cwd
// (absolute patterns return absolute paths), as Node 22's fs.globSync does for strings.
function globSync(pattern, options = {}) {
  const patterns = Array.isArray(pattern) ? pattern : [pattern];
  const cwd = options.cwd ? String(options.cwd instanceof URL ? options.cwd.pathname : options.cwd) : process.cwd();
  const exclude = typeof options.exclude === "function" ? options.exclude : null;
  const results = new Set();
  for (const pat of patterns) {
    const p = String(pat).replace(/\\/g, "/");
    const absolute = path.isAbsolute(p);
    const segs = p.split("/").filter((s, i) => s !== "" && !(s === "." && i === 0));
    // Walk only from the longest literal prefix of the pattern.
    let base = absolute ? "/" : "";
    let i = 0;
    while (i < segs.length - 1 && !hasMagic(segs[i]) && segs[i] !== "**") {
      base = base ? path.posix.join(base, segs[i]) : segs[i];
      i++;
    }
    const rest = segs.slice(i);
    const root = absolute ? base : path.resolve(cwd, base || ".");
    const candidates = [];
    walk(root, "", candidates);
    for (const c of candidates) {
      if (!matchSegments(rest, c.split("/"))) continue;
      const full = absolute ? path.posix.join(base, c) : base ? path.posix.join(base, c) : c;
      if (exclude && exclude(full)) continue;
      results.add(full);
    }
  }
  return [...results];
}

if (typeof fs.globSync !== "function") {
  fs.globSync = globSync;
  globalThis.__mcpgwGlobSync = globSync;
  register("./globsync-hooks.mjs", import.meta.url);
}
