// The agent's tool activities (the model's is the AI SDK plugin's `invokeModel`). `sendEmail` is blind:
// each attempt appends its line to the run's mail file. `sendEmailGuarded` is exactly-once by its own
// means, with no library: the email's key (the workflow id and the AI SDK's tool call id, which the
// model made and history keeps, so the same on every retry) names its file, written aside and
// published with link(2), which fails if the file exists: a retry after the publish skips it, one
// before it publishes it once. The lab proves either by reading the folder
// (`--effects file:$CHECKPOINT_HOME/example-out`).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';

export interface Email {
  to: string;
  body: string;
  pace: number;
}

export interface ToolCallEmail extends Email {
  toolCallId: string;
}

const ADDRESS = /^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,55}$/;
const TEXT = /^[^\x00-\x1f\x7f]{1,500}$/;
const CALL_ID = /^[\x21-\x7e]{1,128}$/;

function outDir(): string {
  if (process.env.EXAMPLE_OUT_DIR) return path.resolve(process.env.EXAMPLE_OUT_DIR);
  return path.resolve(process.env.CHECKPOINT_HOME || process.cwd(), 'example-out');
}

// A workflow id (or a model's call id) is anyone's text: a file name of its own, never a path elsewhere.
export function safe(id: string): string {
  const plain = id.replace(/[^A-Za-z0-9._-]/g, '_');
  if (plain === id && id.length > 0 && id.length <= 120 && !id.startsWith('.')) return id;
  const digest = crypto.createHash('sha256').update(id).digest('hex').slice(0, 16);
  return `${plain.replace(/^\.+/, '').slice(0, 80) || 'id'}+${digest}`;
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

// The arguments come from a model (to, body) and the workflow (pace): checked, never trusted.
function checked(args: Email): { workflowId: string; line: string } {
  const { to, body, pace } = args ?? ({} as Email);
  const ok = typeof to === 'string' && ADDRESS.test(to) && typeof body === 'string' && TEXT.test(body) &&
    typeof pace === 'number' && pace >= 0 && pace <= 5;
  if (!ok) throw ApplicationFailure.nonRetryable('bad tool arguments', 'BadToolArgs');
  // Undefined for a standalone activity (started by a client, not a workflow): these mail for a run.
  const workflowId = Context.current().info.workflowExecution?.workflowId;
  if (!workflowId) throw ApplicationFailure.nonRetryable('sends only for a workflow', 'BadToolArgs');
  return { workflowId, line: `${workflowId} ${to} ${body}\n` };
}

export async function sendEmail(args: Email): Promise<string> {
  const { workflowId, line } = checked(args);
  fs.mkdirSync(outDir(), { recursive: true });
  await sleep(args.pace / 2);
  const fd = fs.openSync(path.join(outDir(), `${safe(workflowId)}.txt`), fs.constants.O_WRONLY |
    fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o644);
  try {
    fs.writeSync(fd, line);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  await sleep(args.pace / 2);
  return `sent to ${args.to}`;
}

export async function sendEmailGuarded(args: ToolCallEmail): Promise<string> {
  const { workflowId, line } = checked(args);
  if (typeof args.toolCallId !== 'string' || !CALL_ID.test(args.toolCallId)) {
    throw ApplicationFailure.nonRetryable('bad tool call id', 'BadToolArgs');
  }
  // '@' is outside safe()'s alphabet: no two (workflow id, call id) pairs name one file
  const final = path.join(outDir(), `${safe(workflowId)}@${safe(args.toolCallId)}.eml`);
  const aside = path.join(`${outDir()}.tmp`, `${process.pid}-${crypto.randomBytes(6).toString('hex')}`);
  fs.mkdirSync(outDir(), { recursive: true });
  fs.mkdirSync(path.dirname(aside), { recursive: true });
  await sleep(args.pace / 2);
  const fd = fs.openSync(aside, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL |
    fs.constants.O_NOFOLLOW, 0o644);
  try {
    fs.writeSync(fd, line);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(aside, final); // the publish: exactly one attempt succeeds
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(aside, { force: true });
  }
  await sleep(args.pace / 2);
  return `sent to ${args.to}`;
}
