import { constants, crc32, deflateRawSync } from 'node:zlib';
import JSZip from 'jszip';

/**
 * ZIP decompression bombs built from a real document: its members re-deflated as they are, plus
 * (or in place of one of them) a member of zeros that inflates to `bytes`, written in a few
 * milliseconds: 16 MiB of zeros are deflated once with a full flush (byte-aligned blocks that
 * need no earlier data), and that block is repeated. The member's sizes in the ZIP headers can be
 * told to lie (a small declared size), as a hostile file would, so a reader that trusts them is
 * caught.
 */

const BLOCK = 16 * 1024 * 1024;

/** Raw deflate data of `bytes` zeros (`bytes` a multiple of 16 MiB), about 1 KiB per MiB. */
export function zeroDeflate(bytes: number): Uint8Array {
  if (bytes % BLOCK !== 0) throw new RangeError(`zeroDeflate takes a multiple of ${BLOCK} bytes`);
  const block = deflateRawSync(Buffer.alloc(BLOCK), { level: 9, finishFlush: constants.Z_FULL_FLUSH });
  const final = deflateRawSync(Buffer.alloc(0));
  return Buffer.concat([...Array.from({ length: bytes / BLOCK }, () => block), final]);
}

function zeroCrc(bytes: number): number {
  const zeros = Buffer.alloc(BLOCK);
  let crc = 0;
  for (let done = 0; done < bytes; done += BLOCK) crc = crc32(zeros, crc);
  return crc;
}

interface Member {
  name: string;
  data: Uint8Array;
  crc: number;
  /** Uncompressed size as the headers state it. */
  declaredSize: number;
}

function writeZip(members: readonly Member[]): Uint8Array {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const member of members) {
    const name = Buffer.from(member.name, 'utf8');
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(member.crc >>> 0, 14);
    local.writeUInt32LE(member.data.length, 18);
    local.writeUInt32LE(member.declaredSize, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(member.crc >>> 0, 16);
    central.writeUInt32LE(member.data.length, 20);
    central.writeUInt32LE(member.declaredSize, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, Buffer.from(member.data));
    centrals.push(central, name);
    offset += 30 + name.length + member.data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(members.length, 8);
  end.writeUInt16LE(members.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/**
 * `sample` (a real ZIP document) with member `name` (replaced, or added) inflating to `bytes`
 * zeros; `lie`: its headers claim 1,000 bytes.
 */
export async function zipBomb(sample: Uint8Array, name: string, bytes: number, options: { lie?: boolean } = {}): Promise<Uint8Array> {
  const zip = await JSZip.loadAsync(sample);
  const members: Member[] = [];
  let replaced = false;
  const bomb = (): Member => ({ name, data: zeroDeflate(bytes), crc: zeroCrc(bytes), declaredSize: options.lie === true ? 1_000 : bytes });
  for (const entry of Object.values(zip.files)) {
    if (entry.dir) continue;
    if (entry.name === name) {
      members.push(bomb());
      replaced = true;
      continue;
    }
    const content = await entry.async('uint8array');
    members.push({ name: entry.name, data: deflateRawSync(content), crc: crc32(content), declaredSize: content.length });
  }
  if (!replaced) members.push(bomb());
  return writeZip(members);
}
