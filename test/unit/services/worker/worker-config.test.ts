import { describe, expect, it } from 'vitest';
import { resolveNatsSettings } from '../../../../adapters/nats/connection/connection.js';
import { EngineSettings } from '../../../../services/settings/engine-settings.js';
import { mergeWorkerInput, parseWorkerConfig, workerConfigFromEnv } from '../../../../services/worker/config.js';

describe('worker configuration', () => {
  it('reads NATS_* and SHOAL_* variables, flags win, nested sections merge', () => {
    const env = {
      NATS_URL: 'nats://a:4222, nats://b:4222',
      NATS_USER: 'shoal',
      NATS_PASSWORD: 'secret',
      SHOAL_MODELS: 'org/a, org/b',
      SHOAL_CONCURRENCY: '3',
      SHOAL_ACK_WAIT_MS: '9000',
      SHOAL_SUBJECT_PREFIX: 'acme',
      SHOAL_MODEL_DIR: '/m1:/m2',
    };
    const config = parseWorkerConfig(mergeWorkerInput(workerConfigFromEnv(env), { concurrency: 5, consumer: { maxDeliver: 2 } }));
    expect(config.nats.servers).toEqual(['nats://a:4222', 'nats://b:4222']);
    expect(config.nats).toMatchObject({ user: 'shoal', pass: 'secret', retryFirstConnect: true });
    expect(config.models).toEqual(['org/a', 'org/b']);
    expect(config.concurrency).toBe(5);
    expect(config.consumer).toEqual({ ackWaitMs: 9000, maxDeliver: 2, maxAckPending: 10_000 });
    expect(config.topology.prefix).toBe('acme');
    expect(config.engine.modelDirs).toEqual(['/m1', '/m2']);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('names the bad field', () => {
    expect(() => parseWorkerConfig(workerConfigFromEnv({ SHOAL_CONCURRENCY: 'lots' }))).toThrow(/concurrency/);
    expect(() => parseWorkerConfig({ nats: {}, consumer: { ackWaitMs: 10 } })).toThrow(/consumer\.ackWaitMs/);
  });

  it('refuses half or conflicting NATS credentials', () => {
    expect(() => resolveNatsSettings({ user: 'u' })).toThrow(/user and pass go together/);
    expect(() => resolveNatsSettings({ token: 't', credsFile: '/x.creds' })).toThrow(/one of user\/pass, token or credsFile/);
    expect(resolveNatsSettings({}).servers).toEqual(['nats://127.0.0.1:4222']);
  });
});

describe('worker image policy and batch tokens from the environment', () => {
  it('reads SHOAL_IMAGE_ROOTS, SHOAL_IMAGE_HOSTS and SHOAL_BATCH_TOKENS=auto', () => {
    const raw = workerConfigFromEnv({ NATS_URL: 'nats://127.0.0.1:4222', SHOAL_IMAGE_ROOTS: '/a:/b', SHOAL_IMAGE_HOSTS: 'cdn.example.com, *.img.example.com', SHOAL_BATCH_TOKENS: 'auto' });
    expect(raw.engine).toMatchObject({ imageRoots: ['/a', '/b'], imageHosts: ['cdn.example.com', '*.img.example.com'], batchTokens: 'auto' });
    const engine = EngineSettings.parse(raw.engine);
    expect(engine.batchTokens).toBe('auto');
    expect(EngineSettings.parse({}).imageHosts).toEqual([]);
  });
});

describe('worker metrics port from the environment', () => {
  it('is off by default and read from SHOAL_METRICS_PORT / SHOAL_METRICS_HOST', () => {
    expect(parseWorkerConfig(workerConfigFromEnv({})).metricsPort).toBeNull();
    const config = parseWorkerConfig(workerConfigFromEnv({ SHOAL_METRICS_PORT: '9464', SHOAL_METRICS_HOST: '127.0.0.1' }));
    expect(config).toMatchObject({ metricsPort: 9464, metricsHost: '127.0.0.1' });
    expect(() => parseWorkerConfig(workerConfigFromEnv({ SHOAL_METRICS_PORT: '70000' }))).toThrow(/metricsPort/);
  });
});
