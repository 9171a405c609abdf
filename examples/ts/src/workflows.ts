// The agent's workflows: the Vercel AI SDK's `generateText` with one tool, `sendEmail`, run in the
// workflow by Temporal's AI SDK plugin (@temporalio/ai-sdk). Each model request is the plugin's
// activity `invokeModel`; each tool call runs `execute` here, which sends through an activity:
// `TsAgentMailer` the blind `sendEmail`, `TsAgentMailerGuarded` the exactly-once `sendEmailGuarded`,
// handed the AI SDK's toolCallId as its key. Deterministic: no clock, randomness or I/O here (the
// sandbox makes the AI SDK's own Date and Math.random replay-safe).
import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import { TemporalProvider } from '@temporalio/ai-sdk/workflow';
import { generateText, isStepCount, tool } from 'ai';
import { z } from 'zod';
import type * as activities from './activities';

// Every activity heartbeats (the worker's pulse: worker.ts), so a killed worker's attempt is retried
// after 2 s, not after the start-to-close timeout.
const OPTIONS = {
  startToCloseTimeout: '30s',
  heartbeatTimeout: '2s',
  retry: { initialInterval: '200ms', maximumInterval: '2s' },
} as const;
const { sendEmail, sendEmailGuarded } = proxyActivities<typeof activities>(OPTIONS);
// The model's requests: the plugin's `invokeModel` activity, with the same options.
const provider = new TemporalProvider({ languageModel: OPTIONS });
// The name the worker's provider is asked for (its scripted model answers to any).
const MODEL = 'scripted-mailer';

const MAX_TURNS = 40;
const MAX_S = 5;
const ADDRESS = /^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,55}$/;
const TEXT = /^[^\x00-\x1f\x7f]{1,500}$/;

export interface Plan {
  turns: number;
  to: string;
  pace: number;
  think: number;
}

function bad(message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, 'BadInput');
}

// The input is a user's: refused (not retried) when it cannot be right.
function parse(input: unknown): Plan {
  const raw = input === undefined || input === null ? {} : input;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw bad('the input is a JSON object like {"turns": 5}');
  const known = ['turns', 'to', 'pace', 'think'];
  if (Object.keys(raw).some((k) => !known.includes(k))) throw bad(`the input takes ${known.join(', ')}`);
  const { turns = 5, to = 'ops@example.com', pace = 0.3, think = 0.2 } = raw as Record<string, unknown>;
  if (typeof turns !== 'number' || !Number.isInteger(turns) || turns < 1 || turns > MAX_TURNS) {
    throw bad(`turns must be an integer 1..${MAX_TURNS}`);
  }
  if (typeof to !== 'string' || !ADDRESS.test(to)) throw bad('to must be an address like ops@example.com');
  for (const [name, v] of [['pace', pace], ['think', think]] as const) {
    if (typeof v !== 'number' || !(v >= 0 && v <= MAX_S)) throw bad(`${name} must be 0..${MAX_S} seconds`);
  }
  return { turns, to, pace: pace as number, think: think as number };
}

async function mail(input: unknown, guarded: boolean): Promise<string> {
  const plan = parse(input);
  const sendEmailTool = tool({
    description: 'Send one email. Returns a receipt.',
    inputSchema: z.object({
      to: z.string().regex(ADDRESS),
      body: z.string().regex(TEXT),
    }),
    // Runs in the workflow: the send itself is an activity. The toolCallId is the model's (recorded
    // in the model request's result in history), the same on every retry and replay of this call.
    execute: async ({ to, body }, { toolCallId }) =>
      guarded
        ? sendEmailGuarded({ to, body, pace: plan.pace, toolCallId })
        : sendEmail({ to, body, pace: plan.pace }),
  });
  const result = await generateText({
    model: provider.languageModel(MODEL),
    system: 'You are a mailer. Send the emails the plan asks for with the sendEmail tool, one per turn.',
    // The plan: the scripted model reads its turns, address and thinking time from it.
    prompt: JSON.stringify({ turns: plan.turns, to: plan.to, think: plan.think }),
    tools: { sendEmail: sendEmailTool },
    // A step per email and one for the answer (and one spare).
    stopWhen: isStepCount(plan.turns + 2),
    // Temporal retries the model activity; the AI SDK's own retries would only wrap its failure.
    maxRetries: 0,
  });
  return result.text;
}

export async function TsAgentMailer(input: unknown): Promise<string> {
  return mail(input, false);
}

export async function TsAgentMailerGuarded(input: unknown): Promise<string> {
  return mail(input, true);
}
