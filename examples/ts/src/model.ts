// The scripted model: an OpenAI-compatible Chat Completions endpoint (`POST /v1/chat/completions`,
// non-streaming) that the worker starts on 127.0.0.1 at a port the OS picks. It decides from the
// request alone, as a stateless model would: the plan is the first user message (JSON: turns, to,
// think); it counts the tool results already in the conversation, and while fewer than `turns`
// answers with one call of the `sendEmail` tool (body "hello, this is turn <i>", a fresh random call
// id, as a real model's), then with the text "sent <turns> emails to <to>". It thinks `think` seconds
// first and reports usage (tokens counted as a quarter of the characters). Every input is bounded: the
// body's size, its JSON nesting, the number of messages; anything else is answered 4xx.
import * as crypto from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

const MAX_BODY = 1 << 20; // bytes of one request
const MAX_DEPTH = 16; // nesting of its JSON
const MAX_MESSAGES = 500;
const MAX_TURNS = 40;
const MAX_THINK_S = 5;
const TOOL = 'sendEmail';
const ADDRESS = /^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,55}$/;

export interface ScriptedModel {
  url: string; // the base URL, ending in /v1
  close(): Promise<void>;
}

class Refused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// The nesting of a JSON text, measured before it is parsed (strings skipped): deeper is refused.
function depthWithin(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return false;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return true;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// A message's text: a string, or the text parts of a list of parts.
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p) => isObject(p) && p.type === 'text' && typeof p.text === 'string')
    .map((p) => (p as { text: string }).text)
    .join('');
}

interface Plan {
  turns: number;
  to: string;
  think: number;
}

function planOf(messages: unknown[]): Plan {
  const first = messages.find((m) => isObject(m) && m.role === 'user') as Record<string, unknown> | undefined;
  let plan: unknown;
  try {
    plan = JSON.parse(textOf(first?.content));
  } catch {
    throw new Refused(400, 'the first user message is a JSON plan: {"turns": N, "to": address, "think": s}');
  }
  if (!isObject(plan)) throw new Refused(400, 'the plan is a JSON object');
  const { turns, to, think = 0 } = plan;
  if (typeof turns !== 'number' || !Number.isInteger(turns) || turns < 1 || turns > MAX_TURNS) {
    throw new Refused(400, `the plan's turns is an integer 1..${MAX_TURNS}`);
  }
  if (typeof to !== 'string' || !ADDRESS.test(to)) throw new Refused(400, "the plan's to is an address");
  if (typeof think !== 'number' || !(think >= 0 && think <= MAX_THINK_S)) {
    throw new Refused(400, `the plan's think is 0..${MAX_THINK_S} seconds`);
  }
  return { turns, to, think };
}

function randomId(prefix: string): string {
  return `${prefix}${crypto.randomBytes(12).toString('base64url')}`;
}

function tokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

// The answer to one request, or Refused.
function answer(raw: string): { completion: Record<string, unknown>; think: number } {
  if (!depthWithin(raw, MAX_DEPTH)) throw new Refused(400, `JSON nested deeper than ${MAX_DEPTH}`);
  let request: unknown;
  try {
    request = JSON.parse(raw);
  } catch {
    throw new Refused(400, 'the body is not JSON');
  }
  if (!isObject(request)) throw new Refused(400, 'the body is a JSON object');
  if (request.stream === true) throw new Refused(400, 'this model does not stream');
  const { messages, tools } = request;
  if (!Array.isArray(messages) || messages.length === 0 || messages.length > MAX_MESSAGES) {
    throw new Refused(400, `messages is a list of 1..${MAX_MESSAGES}`);
  }
  const offered = Array.isArray(tools) && tools.some((t) => isObject(t) && isObject(t.function) && t.function.name === TOOL);
  if (!offered) throw new Refused(400, `the request offers no ${TOOL} tool`);
  const plan = planOf(messages);
  const done = messages.filter((m) => isObject(m) && m.role === 'tool').length;
  const model = typeof request.model === 'string' ? request.model.slice(0, 100) : 'scripted-mailer';
  let message: Record<string, unknown>;
  let finish: string;
  let said: string;
  if (done < plan.turns) {
    said = JSON.stringify({ to: plan.to, body: `hello, this is turn ${done + 1}` });
    message = {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: randomId('call_'), type: 'function', function: { name: TOOL, arguments: said } }],
    };
    finish = 'tool_calls';
  } else {
    said = `sent ${plan.turns} emails to ${plan.to}`;
    message = { role: 'assistant', content: said };
    finish = 'stop';
  }
  const prompt = tokens(raw);
  const completion = tokens(said);
  return {
    think: plan.think,
    completion: {
      id: randomId('chatcmpl-'),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, message, finish_reason: finish }],
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    },
  };
}

function reply(res: http.ServerResponse, status: number, body: unknown, close = false): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
  if (close) headers.connection = 'close';
  res.writeHead(status, headers);
  res.end(text);
}

function refuse(res: http.ServerResponse, status: number, message: string, close = false): void {
  reply(res, status, { error: { message, type: 'invalid_request_error', code: null } }, close);
}

// Answered before the body is read (too big): the rest of it is not read, the connection is closed.
function refuseUnread(req: http.IncomingMessage, res: http.ServerResponse, status: number, message: string): void {
  res.on('finish', () => req.destroy());
  refuse(res, status, message, true);
}

function handle(req: http.IncomingMessage, res: http.ServerResponse): void {
  const route = (req.url ?? '').split('?')[0];
  if (req.method !== 'POST' || (route !== '/v1/chat/completions' && route !== '/chat/completions')) {
    refuseUnread(req, res, 404, 'only POST /v1/chat/completions');
    return;
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  if (!(declared <= MAX_BODY)) {
    refuseUnread(req, res, 413, `the body is over ${MAX_BODY} bytes`);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_BODY) {
      if (!over) refuseUnread(req, res, 413, `the body is over ${MAX_BODY} bytes`);
      over = true;
      chunks.length = 0;
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (over) return;
    let result: { completion: Record<string, unknown>; think: number };
    try {
      result = answer(Buffer.concat(chunks).toString('utf8'));
    } catch (err) {
      if (err instanceof Refused) refuse(res, err.status, err.message);
      else refuse(res, 500, 'the scripted model failed');
      return;
    }
    const timer = setTimeout(() => reply(res, 200, result.completion), result.think * 1000);
    res.on('close', () => clearTimeout(timer));
  });
  req.on('error', () => res.destroy());
}

// Starts the model on 127.0.0.1 (loopback only) at a free port the OS picks.
export function startScriptedModel(): Promise<ScriptedModel> {
  const server = http.createServer({ maxHeaderSize: 16 * 1024 }, handle);
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxRequestsPerSocket = 1000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
