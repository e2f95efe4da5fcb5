// Interop test: tasks (the 2025-11-25 tasks utility) through mcpgw. The
// TypeScript SDK v1 client's experimental tasks API drives
// server-everything's simulate-research-query (execution.taskSupport
// "required") on the gateway's prefixed route /mcp: the gateway advertises
// the tasks capability, the task is created under an id the gateway hands
// out, polled with tasks/get, and when it needs input (ambiguous: true) the
// elicitation it asks for arrives on the tasks/result stream, tagged with
// that same id; the client's answer shapes the completed result. It also
// lists the caller's tasks and cancels one.
//
//   MCPGW_URL=http://127.0.0.1:PORT/mcp node --test test/interop/tasks.test.mjs   (run.sh does this)

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { textOf } from './helpers.mjs';

const GATEWAY_URL = process.env.MCPGW_URL;
if (!GATEWAY_URL) throw new Error('set MCPGW_URL (e.g. http://127.0.0.1:18080/mcp)');
const TOOL = 'everything__simulate-research-query';
const RELATED = 'io.modelcontextprotocol/related-task';
const TEST_TIMEOUT = 60_000;

/** A session that answers elicitations with interpretation "snake". */
async function open(t) {
  const client = new Client({ name: 'mcpgw-interop-tasks', version: '0.0.0' }, { capabilities: { elicitation: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    return { action: 'accept', content: { interpretation: 'snake' } };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(GATEWAY_URL)));
  t.after(() => client.close().catch(() => {}));
  // The SDK learns which tools run as tasks from tools/list, and keeps
  // what the last page it read says: stop at the page that has the tool.
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    if (page.tools.some((tool) => tool.name === TOOL)) break;
    cursor = page.nextCursor;
  } while (cursor);
  return { client, asked };
}

test('the route advertises the tasks its upstream offers', { timeout: TEST_TIMEOUT }, async (t) => {
  const { client } = await open(t);
  const tasks = client.getServerCapabilities()?.tasks;
  assert.ok(tasks?.requests?.tools?.call, `tasks.requests.tools.call missing: ${JSON.stringify(tasks)}`);
  assert.ok(tasks?.list && tasks?.cancel, `tasks.list and tasks.cancel expected: ${JSON.stringify(tasks)}`);
  assert.equal(client.isToolTaskRequired(TOOL), true, `${TOOL} should be a required-task tool`);
});

test('simulate-research-query runs to a completed result, with its elicitation via tasks/result', { timeout: TEST_TIMEOUT }, async (t) => {
  const { client, asked } = await open(t);
  const seen = [];
  let taskId;
  let result;
  for await (const msg of client.experimental.tasks.callToolStream({ name: TOOL, arguments: { topic: 'python', ambiguous: true } })) {
    seen.push(msg.type === 'taskStatus' ? `${msg.type}:${msg.task.status}` : msg.type);
    if (msg.type === 'taskCreated') taskId = msg.task.taskId;
    if (msg.type === 'result') result = msg.result;
    if (msg.type === 'error') assert.fail(`task failed: ${msg.error} (messages: ${seen.join(', ')})`);
  }
  assert.match(taskId ?? '', /^mcpgw-task1\./, `the task id the client got should be one the gateway hands out: ${taskId}`);
  assert.ok(seen.includes('taskStatus:input_required'), `the task should have asked for input: ${seen.join(', ')}`);
  assert.equal(asked.length, 1, `one elicitation expected, got ${JSON.stringify(asked)}`);
  assert.equal(asked[0]._meta?.[RELATED]?.taskId, taskId, 'the elicitation should name the task by the id the client knows');
  assert.ok(result, `no result (messages: ${seen.join(', ')})`);
  const text = textOf(result);
  assert.match(text, /Research Report: python \(snake\)/, `the result should carry the client's answer: ${text.slice(0, 200)}`);
  assert.equal(result._meta?.[RELATED]?.taskId, taskId, 'tasks/result should name the task by its id here');

  const got = await client.experimental.tasks.getTask(taskId);
  assert.equal(got.taskId, taskId);
  assert.equal(got.status, 'completed');
  const listed = [];
  let cursor;
  do {
    const page = await client.experimental.tasks.listTasks(cursor);
    listed.push(...page.tasks.map((x) => x.taskId));
    cursor = page.nextCursor;
  } while (cursor);
  assert.ok(listed.includes(taskId), `tasks/list should list the caller's task ${taskId}: ${listed}`);
});

test('a task is cancelled through the gateway', { timeout: TEST_TIMEOUT }, async (t) => {
  const { client } = await open(t);
  const stream = client.experimental.tasks.callToolStream({ name: TOOL, arguments: { topic: 'weather' } });
  const first = await stream.next();
  assert.equal(first.value?.type, 'taskCreated', `first message: ${JSON.stringify(first.value)}`);
  const { taskId } = first.value.task;
  await stream.return();
  const cancelled = await client.experimental.tasks.cancelTask(taskId);
  assert.equal(cancelled.taskId, taskId);
  assert.equal(cancelled.status, 'cancelled');
  await assert.rejects(client.experimental.tasks.getTask('mcpgw-task1.not-a-task'), /task not found/);
});
