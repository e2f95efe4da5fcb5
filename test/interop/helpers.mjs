// Helpers the interop test files share.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

/** The text blocks of a tool result, joined by newlines. */
export const textOf = (result) =>
  (result.content || [])
    .filter((b) => b.type === 'text')
    .map((b) => b.text)
    .join('\n');

/** Fails unless result is a tool result with content and without isError. */
export function assertToolOK(result, what) {
  assert.ok(!result.isError, `${what} returned isError: ${JSON.stringify(result)}`);
  assert.ok(Array.isArray(result.content) && result.content.length > 0, `${what}: empty content: ${JSON.stringify(result)}`);
}

/** Resolves when pred() holds, polling every `every` ms; rejects after ms. */
export async function waitFor(pred, ms, what, every = 50) {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(every);
  }
}
