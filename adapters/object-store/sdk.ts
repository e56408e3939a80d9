/**
 * The AWS SDK, loaded on first use: importing it costs about half a second, which every `shoal`
 * command would otherwise pay at start-up (the command tree imports ingest and the jobs client)
 * although most never touch S3. Everything else in this folder imports the SDK's types only.
 */

type S3Sdk = typeof import('@aws-sdk/client-s3');

let loading: Promise<S3Sdk> | null = null;

export function s3Sdk(): Promise<S3Sdk> {
  loading ??= import('@aws-sdk/client-s3');
  return loading;
}
