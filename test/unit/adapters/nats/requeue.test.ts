import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { REQUEUE_HEADERS, priorDeliveries, publishRequeue, requeueCount, requeueHeaders, requeueMessageId } from '../../../../adapters/nats/jobs/requeue.js';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';

/** A part as the jobs client publishes it: its message id, plus a header of someone else's. */
function submitted(): MsgHdrs {
  const h = natsHeaders();
  h.set('Nats-Msg-Id', 'job-1.7');
  h.set('X-Trace', 'abc');
  return h;
}

interface Published {
  subject: string;
  data: Uint8Array;
  headers: MsgHdrs | undefined;
  msgID: string | undefined;
  stream: string | undefined;
}

function recorder(fail = false): { js: Pick<JetStreamClient, 'publish'>; published: Published[] } {
  const published: Published[] = [];
  const js: Pick<JetStreamClient, 'publish'> = {
    publish: (subject, payload, options) => {
      if (fail) return Promise.reject(new Error('no stream answered'));
      const data = payload instanceof Uint8Array ? payload : new Uint8Array();
      published.push({ subject, data, headers: options?.headers, msgID: options?.msgID, stream: options?.expect?.streamName });
      const ack: PubAck = { stream: 'SHOAL_JOBS', seq: published.length, duplicate: false, domain: '' };
      return Promise.resolve(ack);
    },
  };
  return { js, published };
}

describe('handing an interrupted part back to the queue', () => {
  it('counts nothing for a part as submitted', () => {
    expect(requeueCount(submitted())).toBe(0);
    expect(priorDeliveries(submitted())).toBe(0);
    expect(requeueCount(undefined)).toBe(0);
  });

  it('publishes the same body and headers under a new message id, counting the requeue', async () => {
    const { js, published } = recorder();
    const data = new TextEncoder().encode('{"job_id":"job-1","part":7}');
    await publishRequeue(js, 'SHOAL_JOBS', { subject: 'shoal.jobs.encode.m', data, headers: submitted(), deliveries: 1 }, 'job-1.7');
    expect(published).toHaveLength(1);
    const copy = published[0];
    expect(copy?.subject).toBe('shoal.jobs.encode.m');
    expect(copy?.data).toBe(data);
    expect(copy?.stream).toBe('SHOAL_JOBS');
    expect(copy?.msgID).toBe('job-1.7.requeue.1');
    expect(copy?.headers?.get('X-Trace')).toBe('abc');
    expect(requeueCount(copy?.headers)).toBe(1);
    // The interrupted delivery itself does not count; there was no other.
    expect(priorDeliveries(copy?.headers)).toBe(0);
  });

  it('chains: the copy of a copy keeps the submitted id as its base and adds up earlier deliveries', () => {
    // A part that failed twice (nak'ed) was interrupted on its third delivery...
    const first = requeueHeaders({ subject: 's', data: new Uint8Array(), headers: submitted(), deliveries: 3 }, 1);
    first.set('Nats-Msg-Id', 'job-1.7.requeue.1');
    expect(priorDeliveries(first)).toBe(2);
    // ...then its copy failed once and was interrupted on its second delivery.
    const second = requeueHeaders({ subject: 's', data: new Uint8Array(), headers: first, deliveries: 2 }, requeueCount(first) + 1);
    expect(requeueCount(second)).toBe(2);
    expect(priorDeliveries(second)).toBe(3);
    expect(second.get(REQUEUE_HEADERS.count)).toBe('2');
    // The message id the stream would store is not copied: publish sets the new one.
    expect(second.get('Nats-Msg-Id')).toBe('');
    expect(second.values(REQUEUE_HEADERS.count)).toEqual(['2']);
    expect(requeueMessageId(first, 'job-1.7', 2)).toBe('job-1.7.requeue.2');
  });

  it('uses the part id when the message had no id, and ignores malformed counters', () => {
    expect(requeueMessageId(undefined, 'job-2.0', 1)).toBe('job-2.0.requeue.1');
    const forged = natsHeaders();
    forged.set(REQUEUE_HEADERS.count, '-3');
    forged.set(REQUEUE_HEADERS.priorDeliveries, '1e9');
    expect(requeueCount(forged)).toBe(0);
    expect(priorDeliveries(forged)).toBe(0);
  });

  it('rejects with a ShoalError when the copy cannot be stored (the caller naks instead)', async () => {
    const { js } = recorder(true);
    const error: unknown = await publishRequeue(js, 'SHOAL_JOBS', { subject: 's', data: new Uint8Array(), headers: submitted(), deliveries: 1 }, 'job-1.7').catch((e: unknown) => e);
    expect(hasErrorCode(error, ErrorCode.INTERNAL)).toBe(true);
  });
});
