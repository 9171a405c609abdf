// The mailer's workflow: each turn a model request (`think`, the scripted model's stand-in: it decides
// the email) and a tool call that sends it. `TsMailer` sends with the blind tool, `TsMailerGuarded` with
// the one that is exactly-once by its own means. Deterministic: no clock, randomness or I/O here.
const { proxyActivities, ApplicationFailure } = require('@temporalio/workflow');

const OPTIONS = {
  startToCloseTimeout: '30s',
  heartbeatTimeout: '2s',
  retry: { initialInterval: '200ms', maximumInterval: '2s' },
};
const { think, sendEmail, sendEmailGuarded } = proxyActivities(OPTIONS);
const MAX_TURNS = 40;
const MAX_S = 5;
const ADDRESS = /^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,55}$/;

// The input is a user's: refused (not retried) when it cannot be right.
function parse(input) {
  const raw = input === undefined || input === null ? {} : input;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw bad('the input is a JSON object like {"turns": 5}');
  const known = ['turns', 'to', 'pace', 'think'];
  if (Object.keys(raw).some((k) => !known.includes(k))) throw bad(`the input takes ${known.join(', ')}`);
  const { turns = 5, to = 'ops@example.com', pace = 0.3, think: thinkS = 0.2 } = raw;
  if (!Number.isInteger(turns) || turns < 1 || turns > MAX_TURNS) throw bad(`turns must be an integer 1..${MAX_TURNS}`);
  if (typeof to !== 'string' || !ADDRESS.test(to)) throw bad('to must be an address like ops@example.com');
  for (const [name, v] of [['pace', pace], ['think', thinkS]]) {
    if (typeof v !== 'number' || !(v >= 0 && v <= MAX_S)) throw bad(`${name} must be 0..${MAX_S} seconds`);
  }
  return { turns, to, pace, think: thinkS };
}

function bad(message) {
  return ApplicationFailure.nonRetryable(message, 'BadInput');
}

async function mail(input, tool) {
  const plan = parse(input);
  for (let turn = 1; turn <= plan.turns; turn++) {
    const body = await think({ turn, think: plan.think });
    await tool({ to: plan.to, body, turn, pace: plan.pace });
  }
  return `sent ${plan.turns} emails to ${plan.to}`;
}

async function TsMailer(input) {
  return mail(input, sendEmail);
}

async function TsMailerGuarded(input) {
  return mail(input, sendEmailGuarded);
}

module.exports = { TsMailer, TsMailerGuarded };
