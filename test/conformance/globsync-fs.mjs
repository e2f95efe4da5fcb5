// `node:fs` plus `globSync` (installed on the fs object by globsync-preload.mjs).
import fs from "node:fs";
export * from "node:fs";
export const globSync = fs.globSync;
export default fs;
