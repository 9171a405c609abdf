// The agent's worker: `node lib/worker.js` (or `npm run worker`), after `npm run build`. Connects to
// TEMPORAL_ADDRESS (default 127.0.0.1:7233) in TEMPORAL_NAMESPACE (default `default`), polls
// CHECKPOINT_TASK_QUEUE (default `ts-agent`) with the SDK's default identity (pid@host), until SIGTERM
// or SIGINT. The model is OPENAI_BASE_URL's (an OpenAI-compatible server, e.g.
// http://127.0.0.1:8080/v1, its key in OPENAI_API_KEY), else the scripted one (model.ts), which this
// process starts on 127.0.0.1 at a port the OS picks: it lives and dies with the worker.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import {
  type ActivityExecuteInput,
  type ActivityInboundCallsInterceptor,
  NativeConnection,
  type Next,
  Worker,
} from '@temporalio/worker';
import type { Context } from '@temporalio/activity';
import * as activities from './activities';
import { type ScriptedModel, startScriptedModel } from './model';

// Each activity attempt heartbeats while it runs, the plugin's `invokeModel` too (it does not itself):
// with the workflow's heartbeat timeout (2 s), an attempt whose worker was killed is retried then.
class Pulse implements ActivityInboundCallsInterceptor {
  constructor(private readonly ctx: Context) {}

  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const timer = setInterval(() => this.ctx.heartbeat(), 500);
    try {
      return await next(input);
    } finally {
      clearInterval(timer);
    }
  }
}

// The workflows as `npm run build` bundled them (lib/workflow-bundle.js: a start skips webpack), else
// bundled now from their source.
function workflowCode(): { workflowBundle: { codePath: string } } | { workflowsPath: string } {
  const bundle = path.join(__dirname, 'workflow-bundle.js');
  return fs.existsSync(bundle) ? { workflowBundle: { codePath: bundle } } : { workflowsPath: require.resolve('./workflows') };
}

async function main(): Promise<void> {
  let scripted: ScriptedModel | undefined;
  let baseURL = process.env.OPENAI_BASE_URL;
  if (!baseURL) {
    scripted = await startScriptedModel();
    baseURL = scripted.url;
    console.log(`the scripted model: ${baseURL}`);
  }
  const modelProvider = createOpenAICompatible({
    name: 'openai-compatible',
    baseURL,
    apiKey: process.env.OPENAI_API_KEY || undefined,
    includeUsage: true,
  });
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS || '127.0.0.1:7233' });
  try {
    const worker = await Worker.create({
      connection,
      namespace: process.env.TEMPORAL_NAMESPACE || 'default',
      taskQueue: process.env.CHECKPOINT_TASK_QUEUE || 'ts-agent',
      ...workflowCode(),
      activities,
      // The plugin: its model activity (`invokeModel`, calling modelProvider) and the Web-API
      // polyfills the AI SDK needs in the workflow bundle.
      plugins: [new AiSdkPlugin({ modelProvider })],
      interceptors: { activity: [(ctx) => ({ inbound: new Pulse(ctx) })] },
      // A killed worker's sticky queue holds the workflow's next task this long (the SDK's default is 10 s).
      stickyQueueScheduleToStartTimeout: '1s',
      shutdownGraceTime: '1s',
    });
    await worker.run();
  } finally {
    await connection.close();
    await scripted?.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
