import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mixedCorpus } from '../../../../bench/lib/corpora.js';
import { TextTokenizer } from '../../../../adapters/tokenizers/text-tokenizer.js';
import { readTokenizerFiles, type TokenizerFiles } from '../../../../adapters/tokenizers/tokenizer-files.js';
import { WordPieceFast } from '../../../../adapters/tokenizers/wordpiece-fast.js';
import { CONFORMANCE_DIR, DATA_DIR, FIXTURES_DIR, missingReason, sharedAvailable } from '../../../helpers/shared.js';

/**
 * The WordPiece fast path against @huggingface/tokenizers itself: for every BERT WordPiece
 * tokenizer at hand (the committed fixtures, and the conformance kit's when it is present) the
 * fast ids must equal the library's on the bench corpus, SciFact and a list of adversarial texts;
 * the only texts allowed to fall back are those containing an added token. Every combination of
 * the BertNormalizer's options is run the same way on a real vocab.
 */

const SCIFACT = join(DATA_DIR, 'scifact', 'corpus.jsonl');
const sharedPresent = sharedAvailable(CONFORMANCE_DIR) && sharedAvailable(SCIFACT);

const LONG = 'a'.repeat(101);
/** clean_text removes the control character; without lowercasing the text becomes exactly [CLS]. */
const NORMALIZES_TO_CLS = '[C\u0001LS]';
const ADVERSARIAL: readonly string[] = [
  '',
  ' ',
  ' \t\n\r\u00a0\u3000 ',
  '\u3000\u3000',
  'Café naïve résumé coöperate façade Ångström São Paulo Dvořák Łódź',
  'e\u0301 a\u0300\u0301\u0302 o\u0308\u0308 x\u0323\u0307 q\u20dd \u0301alone \u0903devanagari-mark',
  'İstanbul İI ıi IJ ǅ ǈ ᾼ ﬁ ﬀ ﬃ K Å Ω',
  'Straße STRASSE ẞ ß groß GROẞ',
  'ΟΔΥΣΣΕΥΣ Σ ΣΑΣ ΑΣ. ΑΣ\u0301 ΑΣ\u200bΒ όσος ΌΣΟΣ',
  '中文文本测试。我爱北京天安门！',
  'Mixed中文and English混合text123数字',
  '日本語のテキスト：ひらがな、カタカナ、ｶﾀｶﾅ。',
  '한국어 텍스트입니다. 안녕하세요!',
  '𠀀𠀁 𪚥 丽 﨎 CJK ext B and compatibility 豈 更',
  'emoji 😀👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ flags 🇫🇷🇩🇪 keycap 1️⃣',
  'ctrl\u0000a\u0001b\u0002c\u0007d\u001be\u007ff\u0085g\u200bh\u200di\ufeffj\ufffdk\u00adl',
  'tabs\tand\nnewlines\r\nvertical\u000btab\u000cformfeed\u001cfs\u001fus',
  'nbsp\u00a0word\u2000en\u2009thin\u202fnarrow\u205fmath\u2028line\u2029para\u1680ogham',
  '“Quoted” ‘single’ — em – en … ellipsis ¿Qué? ¡Hola! «guillemets» ‹single› „low“ ‚low‘',
  '§ ¶ † ‡ • ‰ ′ ″ ‽ ⁂ ※ 〈 〉 【 】 「 」 『 』 〔 〕 ・ ゠ ﹏ ＿ ｛ ｝ ！ ？ ， 。',
  'math ∑ ∫ √ ∞ ≤ ≥ ≠ ± × ÷ ∂ ∇ ∈ ∉ ⊂ ⊃ ∧ ∨ ¬ → ⇒ ↔ ∀ ∃ α+β=γ x²+y³ ½ ¼ ¾',
  'currency $100 €50 £20 ¥1000 ₹500 ₿0.1 ¢ ₩ ₽ 5$ 10€',
  'ascii punct !"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~ end',
  LONG,
  `${LONG} short ${'é'.repeat(101)} ${'é'.repeat(100)} ${'e\u0301'.repeat(60)}`,
  'x'.repeat(100),
  'ab'.repeat(60),
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝐁𝐨𝐥𝐝',
  '\ue000\ue001 private \udb80\udc00 use',
  'ᚠᛇᚻ᛫ᛒᛦᚦ ⠁⠃⠉ ☃☄★☆ ♠♣♥♦',
  'unknown-only: ☃☃☃ ⠁⠃⠉⠙ mixed: cat☃dog a⠁b',
  'literal [CLS] and [SEP] tokens [MASK] here [UNK]',
  '[CLS]',
  '[cls] [mask] lowercased specials',
  NORMALIZES_TO_CLS,
  'pre[MASK]post',
  '<<ENT>> person <<SEP>> text',
  'surrogate pairs 𝄞 𐍈 🀄 and lone \ud800 high \udc00 low \ud83d',
  '\ud800\ud800\udc00\udc00',
  "don't can't it's O'Neill rock'n'roll e-mail co-operate U.S.A. 3.14 1,000,000 10:30 2024-01-01",
  'http://example.com/path?q=1&r=2#frag user@example.org',
  'ALL CAPS TEXT WITH ÀCCÉNTS AND ΕΛΛΗΝΙΚΆ',
  'Ελληνικά ελληνικά Русский текст Ёё Українська ґ',
  'עברית العربية فارسی اردو हिन्दी বাংলা ไทย ລາວ ქართული Հայերեն',
  'Tiếng Việt có dấu: Nguyễn Thị Minh Khai',
  'ﬁnance ﬂow Ⅻ ⅻ ① ⑴ ㈱ ㎏ ℃ ℉ Ⅸ',
  'half\u0301 \u0301 \u0301\u0301 ',
  '\u0000\u0001\u200b\ufeff\ufffd',
  'a\u0300',
];

const TextsLine = z.looseObject({ title: z.string(), text: z.string() });

function scifact(count: number): string[] {
  return readFileSync(SCIFACT, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, count)
    .map((line) => TextsLine.parse(JSON.parse(line)))
    .map((doc) => `${doc.title} ${doc.text}`);
}

function modelDirs(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .map((name) => join(root, name))
    .filter((dir) => existsSync(join(dir, 'tokenizer.json')))
    .sort();
}

interface Candidate {
  dirs: string[];
  files: TokenizerFiles;
}

/** BERT WordPiece tokenizers, one per distinct tokenizer.json (many models share one). */
async function bertTokenizers(roots: readonly string[]): Promise<Candidate[]> {
  const byHash = new Map<string, Candidate>();
  for (const dir of roots.flatMap(modelDirs)) {
    const hash = createHash('sha256').update(readFileSync(join(dir, 'tokenizer.json'))).digest('hex');
    const seen = byHash.get(hash);
    if (seen !== undefined) {
      seen.dirs.push(dir);
      continue;
    }
    const files = await readTokenizerFiles(dir);
    if (files.json.model.type === 'WordPiece') byHash.set(hash, { dirs: [dir], files });
  }
  return [...byHash.values()];
}

interface Comparison {
  mismatches: { text: string; fast: number[]; library: number[] }[];
  fallbacks: string[];
  compared: number;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

function compare(files: TokenizerFiles, texts: readonly string[]): Comparison {
  const library = new Tokenizer(files.raw, files.rawConfig);
  // As TextTokenizer builds it (sharing the library's vocab map) and on its own.
  const shared = WordPieceFast.fromFiles(files, library.model?.tokens_to_ids);
  const own = WordPieceFast.fromFiles(files);
  if (shared === null || own === null) throw new Error('expected a fast path');
  const result: Comparison = { mismatches: [], fallbacks: [], compared: 0 };
  for (const text of texts) {
    const ids = shared.ids(text);
    const ownIds = own.ids(text);
    if (ids === null || ownIds === null) {
      if (ids !== ownIds) result.mismatches.push({ text, fast: ids ?? ownIds ?? [], library: [] });
      result.fallbacks.push(text);
      continue;
    }
    const expected = library.encode(text, { add_special_tokens: false }).ids;
    result.compared++;
    if (!sameIds(ids, expected) || !sameIds(ownIds, expected)) result.mismatches.push({ text, fast: ids, library: expected });
  }
  return result;
}

function addedContents(files: TokenizerFiles): string[] {
  return files.json.added_tokens.map((token) => token.content);
}

function expectExact(files: TokenizerFiles, texts: readonly string[]): Comparison {
  const result = compare(files, texts);
  expect(result.mismatches.slice(0, 3)).toEqual([]);
  // Only texts holding an added token's content (or normalizing to one) are left to the library.
  const contents = addedContents(files);
  const holdsAdded = (text: string): boolean => contents.some((content) => text.includes(content));
  expect(result.fallbacks.filter((text) => !holdsAdded(text) && text !== NORMALIZES_TO_CLS)).toEqual([]);
  expect(texts.filter(holdsAdded).filter((text) => !result.fallbacks.includes(text))).toEqual([]);
  return result;
}

describe('WordPieceFast on the committed fixture tokenizers', async () => {
  const candidates = await bertTokenizers([join(FIXTURES_DIR, 'models')]);

  it('finds the BERT fixtures', () => {
    expect(candidates.length).toBeGreaterThanOrEqual(2);
  });

  it.each(candidates.map((c) => [c.dirs.map((d) => basename(d)).join(', '), c] as const))('gives the library ids on adversarial texts: %s', (_name, candidate) => {
    const result = expectExact(candidate.files, ADVERSARIAL);
    expect(result.compared).toBeGreaterThan(ADVERSARIAL.length - 8);
  });

  it('matches the library on astral and accented vocab entries, counting word length in code points', async () => {
    const bert = await readTokenizerFiles(join(FIXTURES_DIR, 'models', 'tiny-bert-mean'));
    const model = z.looseObject({ vocab: z.record(z.string(), z.number()) }).parse(bert.raw['model']);
    const extra = ['𝐁', '##𝐁', '😀', '##😀', 'é', '##é', 'ß', '##ß', '##\u0301'];
    const vocab = { ...model.vocab, ...Object.fromEntries(extra.map((token, i) => [token, 1000 + i])) };
    const texts = ['𝐁'.repeat(60), '𝐁'.repeat(101), '😀'.repeat(51), `a𝐁b😀${'é'.repeat(20)}`, 'e\u0301'.repeat(40), 'Straße ß', ...ADVERSARIAL];
    for (const strip of [null, false]) {
      const normalizer = { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: strip, lowercase: true };
      const files = { ...bert, raw: { ...bert.raw, normalizer, model: { ...model, vocab } } };
      expectExact(files, texts);
      // 60 code points fit max_input_chars_per_word (100) although they are 120 UTF-16 units.
      expect(WordPieceFast.fromFiles(files)?.ids('𝐁'.repeat(60))).toEqual([1000, ...new Array<number>(59).fill(1001)]);
    }
  });

  it('falls back on literal special tokens and still gives the library ids through TextTokenizer', async () => {
    const tokenizer = await TextTokenizer.load(join(FIXTURES_DIR, 'models', 'tiny-bert-mean'));
    for (const text of ['literal [CLS] and [MASK] here', 'the big dog', 'Café 中文 [SEP]']) {
      const viaTokens = tokenizer.segmentTokens(text).map((token) => tokenizer.tokenToId(token));
      expect(tokenizer.segmentIds(text)).toEqual(viaTokens);
    }
    expect(tokenizer.segmentIds('[CLS]')).toEqual([tokenizer.tokenToId('[CLS]')]);
  });

  it('gives no fast path to other tokenizer shapes', async () => {
    for (const name of ['tiny-roberta-mean', 'tiny-decoder-last', 'tiny-clip']) {
      expect(WordPieceFast.fromFiles(await readTokenizerFiles(join(FIXTURES_DIR, 'models', name)))).toBeNull();
    }
    const bert = await readTokenizerFiles(join(FIXTURES_DIR, 'models', 'tiny-bert-mean'));
    const variant = (patch: Record<string, unknown>): TokenizerFiles => ({ ...bert, raw: { ...bert.raw, ...patch } });
    const model = z.looseObject({}).parse(bert.raw['model']);
    expect(WordPieceFast.fromFiles(bert)).not.toBeNull();
    expect(WordPieceFast.fromFiles(variant({ normalizer: { type: 'Sequence', normalizers: [bert.raw['normalizer']] } }))).toBeNull();
    expect(WordPieceFast.fromFiles(variant({ pre_tokenizer: { type: 'Whitespace' } }))).toBeNull();
    expect(WordPieceFast.fromFiles(variant({ model: { ...model, fuse_unk: true } }))).toBeNull();
    expect(WordPieceFast.fromFiles(variant({ model: { ...model, unk_token: '[NOPE]' } }))).toBeNull();
    expect(WordPieceFast.fromFiles(variant({ added_tokens: [{ id: 1, content: 'dog', special: false }] }))).toBeNull();
    expect(WordPieceFast.fromFiles({ ...bert, rawConfig: { remove_space: true } })).toBeNull();
  });
});

describe.skipIf(!sharedPresent)(`WordPieceFast on the conformance tokenizers and corpora ${sharedPresent ? '' : missingReason(SCIFACT)}`, async () => {
  const candidates = sharedPresent ? await bertTokenizers([CONFORMANCE_DIR, join(FIXTURES_DIR, 'models')]) : [];
  const texts = sharedPresent ? [...mixedCorpus(600), ...scifact(600), ...ADVERSARIAL] : [];

  it('finds the conformance BERT tokenizers and no others', async () => {
    expect(candidates.length).toBeGreaterThanOrEqual(4);
    expect(WordPieceFast.fromFiles(await readTokenizerFiles(join(CONFORMANCE_DIR, 'xlmr-mean-embed')))).toBeNull();
    expect(WordPieceFast.fromFiles(await readTokenizerFiles(join(CONFORMANCE_DIR, 'qwen2-last-embed')))).toBeNull();
  });

  it.each(candidates.map((c) => [c.dirs.map((d) => basename(d)).join(', '), c] as const))(
    'gives the library ids on the bench corpus, SciFact and adversarial texts: %s',
    (_name, candidate) => {
      const result = expectExact(candidate.files, texts);
      expect(result.compared).toBeGreaterThan(1_200);
    },
  );

  it('gives the library ids under every BertNormalizer option', async () => {
    const base = await readTokenizerFiles(join(CONFORMANCE_DIR, 'bench-minilm-l6'));
    const shouting = scifact(40).map((text) => text.toUpperCase());
    const sample = [...ADVERSARIAL, ...shouting, ...mixedCorpus(200)];
    let variants = 0;
    for (const cleanText of [true, false]) {
      for (const chinese of [true, false]) {
        for (const lowercase of [true, false]) {
          for (const strip of [null, true, false]) {
            const normalizer = { type: 'BertNormalizer', clean_text: cleanText, handle_chinese_chars: chinese, strip_accents: strip, lowercase };
            const result = expectExact({ ...base, raw: { ...base.raw, normalizer } }, sample);
            expect(result.compared).toBeGreaterThan(sample.length - 8);
            variants++;
          }
        }
      }
    }
    expect(variants).toBe(24);
  });
});
