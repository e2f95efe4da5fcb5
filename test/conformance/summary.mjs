// Reads the output of one `conformance server` or `conformance client` run
// (file given as argv[2]) and prints one closing line per run, counting
// scenarios:
//
//   conformance: P passed, F failed, S skipped
//
// passed  = scenarios whose checks all passed (stale baseline entries excluded)
// failed  = failing scenarios that decide the exit code (not in the
//           expected-failures baseline, scored) plus stale baseline entries
// skipped = failing scenarios that do not: in the baseline, or run but
//           "not scored" for the requirement set
//
// argv[3] is a label for the run (e.g. "--suite all"), argv[4] the
// expected-failures file used (if any), argv[5] the requirement revision (if
// any): the CLI does not always list expected or not-scored failures itself.
// argv[6] is the leg, "server" (default) or "client". A scenario the
// baseline excuses only some checks of ("<scenario>:<check>") still counts
// as failed when the CLI lists another of its checks as unexpected.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";

const [, , logFile, label = "", baselineFile = "", revision = "", leg = "server"] = process.argv;
const log = readFileSync(logFile, "utf8").replace(/\x1b\[[0-9;]*m/g, "");
const { parse } = createRequire(import.meta.url)("yaml");

const passing = new Set();
const failing = new Set();
const excused = new Set(); // expected failures and not-scored failures
const stale = new Set();
const unexpected = new Set();

let section = "";
for (const line of log.split("\n")) {
  if (line.startsWith("=== SUMMARY ===") || line.startsWith("=== SUITE SUMMARY ===")) section = "summary";
  else if (line.startsWith("Not scored for ")) section = "not-scored";
  else if (line.startsWith("Expected failures (in baseline)")) section = "expected";
  else if (line.startsWith("Stale baseline entries")) section = "stale";
  else if (line.startsWith("Unexpected failures")) section = "unexpected";
  else if (line.startsWith("Total:") || line.trim() === "") {
    if (section === "summary" && line.startsWith("Total:")) section = "";
    continue;
  }

  const m = line.match(/^\s*([✓✗~])\s+([^\s:]+)/);
  if (!m) continue;
  const [, mark, name] = m;
  if (section === "summary") (mark === "✓" ? passing : failing).add(name);
  else if (section === "not-scored" && mark === "✗") excused.add(name);
  else if (section === "expected") excused.add(name);
  else if (section === "stale") stale.add(name);
  else if (section === "unexpected") unexpected.add(name);
}

// A single --scenario run prints no summary table, only its own result line.
const single = log.match(/Running client scenario '([^']+)'/);
const result = log.match(/^Passed: \d+\/\d+, (\d+) failed/m);
if (passing.size + failing.size === 0 && single && result) {
  (result[1] === "0" ? passing : failing).add(single[1]);
}

// Failures the baseline or the requirement set excuses.
if (baselineFile && existsSync(baselineFile)) {
  for (const entry of parse(readFileSync(baselineFile, "utf8"))?.[leg] ?? []) {
    if (typeof entry === "string" && !entry.includes(":")) excused.add(entry);
  }
}
const reqFile = new URL(`./node_modules/@modelcontextprotocol/conformance/requirements/${revision}.yaml`, import.meta.url);
if (revision && existsSync(reqFile)) {
  for (const e of parse(readFileSync(reqFile, "utf8"))?.not_scored ?? []) {
    if (e?.leg === leg && e.scenario) excused.add(e.scenario);
  }
}

if (passing.size + failing.size === 0) {
  console.log(`conformance${label ? ` (${label})` : ""}: no scenario summary found in the output`);
  process.exit(0);
}
const failed = [...failing].filter((n) => !excused.has(n) || unexpected.has(n));
const skipped = [...failing].filter((n) => excused.has(n) && !unexpected.has(n));
const passed = [...passing].filter((n) => !stale.has(n));
if (failed.length) console.log(`failed scenarios${label ? ` (${label})` : ""}: ${failed.join(", ")}`);
if (stale.size) console.log(`stale expected-failure entries (now passing)${label ? ` (${label})` : ""}: ${[...stale].join(", ")}`);
if (skipped.length) console.log(`excused failures (expected-failures baseline or not scored)${label ? ` (${label})` : ""}: ${skipped.join(", ")}`);
console.log(`conformance: ${passed.length} passed, ${failed.length + stale.size} failed, ${skipped.length} skipped`);
