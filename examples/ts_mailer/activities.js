// The mailer's activities. `sendEmail` is blind: each attempt appends its line to the run's mail file.
// `sendEmailGuarded` is exactly-once by its own means, with no library: the email's key (the workflow id
// and the turn, the same on every retry) names its file, written aside and published with link(2), which
// fails if the file exists: a retry after the publish skips it, one before it publishes it once. The lab
// proves either by reading the folder (`--effects file:$CHECKPOINT_HOME/example-out`).
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { Context, ApplicationFailure } = require('@temporalio/activity');

function outDir() {
  if (process.env.EXAMPLE_OUT_DIR) return path.resolve(process.env.EXAMPLE_OUT_DIR);
  return path.resolve(process.env.CHECKPOINT_HOME || process.cwd(), 'example-out');
}

// A workflow id is anyone's text: a file name of its own, never a path elsewhere.
function safe(id) {
  const plain = id.replace(/[^A-Za-z0-9._-]/g, '_');
  if (plain === id && id.length > 0 && id.length <= 120 && !id.startsWith('.')) return id;
  const digest = crypto.createHash('sha256').update(id).digest('hex').slice(0, 16);
  return `${plain.replace(/^\.+/, '').slice(0, 80) || 'workflow'}+${digest}`;
}

// A wait that heartbeats every 500 ms: the workflow's 2 s heartbeat timeout fails a killed worker's
// attempt quickly, and must not fail a live one that sleeps longer (pace up to 5 s).
async function sleep(seconds) {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    Context.current().heartbeat();
    await new Promise((resolve) => setTimeout(resolve, Math.min(500, until - Date.now())));
  }
}

function checked({ to, body, turn, pace }) {
  const ok = typeof to === 'string' && to.length <= 120 && typeof body === 'string' && body.length <= 500 &&
    Number.isInteger(turn) && turn >= 1 && turn <= 40 && typeof pace === 'number' && pace >= 0 && pace <= 5;
  if (!ok) throw ApplicationFailure.nonRetryable('bad tool arguments', 'BadToolArgs');
  const workflowId = Context.current().info.workflowExecution.workflowId;
  return { workflowId, line: `${workflowId} ${to} ${body}\n` };
}

async function think({ turn, think: seconds }) {
  await sleep(Math.min(Math.max(Number(seconds) || 0, 0), 5));
  return `hello, this is turn ${turn}`;
}

async function sendEmail(args) {
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

async function sendEmailGuarded(args) {
  const { workflowId, line } = checked(args);
  const final = path.join(outDir(), `${safe(workflowId)}-turn-${args.turn}.eml`);
  const aside = path.join(`${outDir()}.tmp`, `${process.pid}-${crypto.randomBytes(6).toString('hex')}`);
  fs.mkdirSync(outDir(), { recursive: true });
  fs.mkdirSync(path.dirname(aside), { recursive: true });
  await sleep(args.pace / 2);
  fs.writeFileSync(aside, line, { flag: 'wx', mode: 0o644 });
  try {
    fs.linkSync(aside, final); // the publish: exactly one attempt succeeds
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(aside, { force: true });
  }
  await sleep(args.pace / 2);
  return `sent to ${args.to}`;
}

module.exports = { think, sendEmail, sendEmailGuarded };
