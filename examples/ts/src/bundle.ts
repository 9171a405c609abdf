// The workflows bundled once, at build time (`npm run build`), into lib/workflow-bundle.js: a worker that
// finds it starts polling without bundling them again (webpack over the AI SDK: 2-4 s of a cold start,
// and of every replacement after a kill). The plugin shapes the bundle (its Web-API polyfills first);
// the provider handed to it here is never called: bundling runs no activity.
import { writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';

async function main(): Promise<void> {
  const modelProvider = createOpenAICompatible({ name: 'bundle-only', baseURL: 'http://127.0.0.1:9/v1' });
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./workflows'),
    plugins: [new AiSdkPlugin({ modelProvider })],
    logger: new DefaultLogger('WARN'), // make's output: only what goes wrong
  });
  await writeFile(path.join(__dirname, 'workflow-bundle.js'), code);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
