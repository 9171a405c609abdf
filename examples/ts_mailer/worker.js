// The mailer's worker: `node worker.js` (or `npm run worker`). Connects to TEMPORAL_ADDRESS (default
// 127.0.0.1:7233) in TEMPORAL_NAMESPACE (default `default`), polls CHECKPOINT_TASK_QUEUE (default
// `ts-mailer`) with the SDK's default identity (pid@host), until SIGTERM or SIGINT.
const { NativeConnection, Worker } = require('@temporalio/worker');
const activities = require('./activities');

async function main() {
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS || '127.0.0.1:7233' });
  const worker = await Worker.create({
    connection,
    namespace: process.env.TEMPORAL_NAMESPACE || 'default',
    taskQueue: process.env.CHECKPOINT_TASK_QUEUE || 'ts-mailer',
    workflowsPath: require.resolve('./workflows'),
    activities,
    // A killed worker's sticky queue holds the workflow's next task this long (the SDK's default is 10 s).
    stickyQueueScheduleToStartTimeout: '1s',
    shutdownGraceTime: '1s',
  });
  await worker.run();
  await connection.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
