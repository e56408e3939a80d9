import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveTopologySettings } from '../../../../adapters/nats/connection/topology.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';
import { withConfigFile } from '../../../../services/settings/config-file.js';
import { streamReplicasFromEnv, topologySettingsFromEnv } from '../../../../services/settings/environment.js';
import { SETTINGS } from '../../../../services/settings/table.js';
import { parseWorkerConfig, workerConfigFromEnv } from '../../../../services/worker/config.js';

/**
 * SHOAL_STREAM_REPLICAS reaches the topology settings of every service that creates the streams,
 * KV buckets and object store: the worker, the gateway, and the client commands (sink, submit,
 * ingest --nats, classify --nats) through topologySettingsFromEnv.
 */

describe('SHOAL_STREAM_REPLICAS', () => {
  it('defaults to the topology default (1) everywhere', () => {
    expect(SETTINGS.streamReplicas.default).toBe(resolveTopologySettings().replicas);
    expect(streamReplicasFromEnv({})).toBeUndefined();
    expect(topologySettingsFromEnv({})).toEqual({});
    expect(parseWorkerConfig({ nats: {}, ...workerConfigFromEnv({}) }).topology.replicas).toBe(1);
    expect(resolveGatewayConfig({}, {}).streamReplicas).toBe(1);
  });

  it('is read by the worker, the gateway and the client commands', () => {
    const env = { SHOAL_STREAM_REPLICAS: '3', SHOAL_SUBJECT_PREFIX: 'acme' };
    expect(parseWorkerConfig({ nats: {}, ...workerConfigFromEnv(env) }).topology).toMatchObject({ prefix: 'acme', replicas: 3 });
    expect(resolveGatewayConfig({}, env)).toMatchObject({ natsPrefix: 'acme', streamReplicas: 3 });
    expect(topologySettingsFromEnv(env)).toEqual({ prefix: 'acme', replicas: 3 });
    // A command's --prefix wins over the variable; the replicas still come from the environment.
    expect(topologySettingsFromEnv(env, 'flagged')).toEqual({ prefix: 'flagged', replicas: 3 });
    expect(topologySettingsFromEnv({ SHOAL_STREAM_REPLICAS: ' 5 ' })).toEqual({ replicas: 5 });
  });

  it('refuses counts JetStream does not allow, naming the variable', () => {
    for (const bad of ['0', '6', 'three', '2.5', '-1']) {
      expect(() => streamReplicasFromEnv({ SHOAL_STREAM_REPLICAS: bad }), bad).toThrow(/SHOAL_STREAM_REPLICAS must be a whole number from 1 to 5/);
      expect(() => resolveGatewayConfig({}, { SHOAL_STREAM_REPLICAS: bad }), bad).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
      expect(() => parseWorkerConfig({ nats: {}, ...workerConfigFromEnv({ SHOAL_STREAM_REPLICAS: bad }) }), bad).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
    }
  });

  it('can come from the settings file under its table name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'shoal-replicas-'));
    try {
      const path = join(dir, 'shoal.yaml');
      writeFileSync(path, 'streamReplicas: 3\n');
      expect(streamReplicasFromEnv(withConfigFile({}, path))).toBe(3);
      // A variable that is set wins over the file.
      expect(streamReplicasFromEnv(withConfigFile({ SHOAL_STREAM_REPLICAS: '1' }, path))).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
