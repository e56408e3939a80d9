import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { pickOnnxFiles } from '../sources/file-selection.js';
import { resolveQuantizationSettings } from '../quantize/settings.js';
import { TextTokenizer } from '../tokenizers/text-tokenizer.js';
import type { Evidence } from './family-spec.js';
import { loadFamily } from './family-loaders.js';
import { HfConfig, ModelFolder, SentenceBertConfig, StConfig, StModules } from './model-files.js';
import { detectPastInputs } from './kv-cache-detect.js';
import { positionOffsetFor, positionRuleFor } from './model-types.js';
import { ModelProfile, type ProfileOverrides } from './profile.js';
import { allFamilies, detectFamily, getFamily } from './registry.js';

/**
 * Builds a ModelProfile from a model folder: family, ONNX graphs, max length, prompts, padding,
 * pooling... each fact from the file the Hugging Face ecosystem keeps it in, each recorded in
 * `evidence`, and every catalog override applied last. Runs in a prep thread (tokenizer.json
 * files are large).
 */

const DOCUMENT_PROMPT_NAMES = ['document', 'passage', 'doc', 'corpus'];
const INSTRUCT = /^(Instruct: )(.*)(\nQuery: ?)$/s;

export interface DescribedModel {
  profile: ModelProfile;
  /** Null for families that read no text. */
  tokenizer: TextTokenizer | null;
}

function onnxComponents(folder: ModelFolder, overrides: ProfileOverrides, evidence: string[]): Record<string, string> {
  if (overrides.onnx !== undefined) {
    for (const file of Object.values(overrides.onnx)) {
      if (!folder.has(file)) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `catalog names ONNX file ${file}, which is not in ${folder.dir}`);
    }
    evidence.push(`onnx: from catalog (${Object.values(overrides.onnx).join(', ')})`);
    return overrides.onnx;
  }
  // A folder that ships an int8 export beside the float graph (Optimum's and Xenova's
  // model_quantized.onnx) runs the int8 one unless the catalog says `precision: fp32`: on CPU it is
  // about twice as fast, and its authors shipped it to be used. `auto` starts from the float graph
  // (it quantizes only when every provider is the CPU, which detection cannot know).
  // `q4` picks a shipped 4-bit graph (transformers.js `model_q4.onnx`: MatMulNBits).
  const precision = overrides.precision === 'int8' || overrides.precision === undefined ? 'int8' : overrides.precision === 'q4' ? 'q4' : 'fp32';
  const files = pickOnnxFiles(folder.files.map((path) => ({ path })), precision);
  if (files.length === 0) {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `no ONNX graph in ${folder.dir} (files: ${folder.files.slice(0, 12).join(', ')}${folder.files.length > 12 ? ', ...' : ''}); export the model to ONNX (optimum-cli export onnx) or use an ONNX repository`,
    );
  }
  const components: Record<string, string> = {};
  if (files.length === 1 && files[0] !== undefined) {
    components.model = files[0];
  } else {
    for (const file of files) {
      const stem = file.slice(file.lastIndexOf('/') + 1, -'.onnx'.length).replace(/_(quantized|int8|uint8|fp16|q4|q4f16|bnb4)$/i, '');
      components[stem] = file;
    }
  }
  evidence.push(`onnx: ${Object.entries(components).map(([k, v]) => `${k}=${v}`).join(', ')}`);
  return components;
}

function hardMaxLength(config: HfConfig | undefined, tokenizerMax: number | null): number | null {
  const positions = config?.max_position_embeddings ?? config?.text_config?.max_position_embeddings;
  if (positions === undefined) return tokenizerMax;
  return positions - positionOffsetFor(config?.model_type ?? null);
}

export async function describeModel(id: string, dir: string, overrides: ProfileOverrides = {}): Promise<DescribedModel> {
  const folder = await ModelFolder.open(dir);
  const evidence: string[] = [];
  const config = await folder.json('config.json', HfConfig);
  const modules = (await folder.json('modules.json', StModules)) ?? [];
  const onnx = onnxComponents(folder, overrides, evidence);
  const facts: Evidence = { name: id, folder, config, modules, onnx, catalogOptions: overrides.options ?? {} };

  const adapter = overrides.family !== undefined ? getFamily(overrides.family) : detectFamily(facts);
  if (adapter === null) {
    const seen = [
      config === undefined ? 'no config.json' : `config.json architectures=${JSON.stringify(config.architectures ?? null)} model_type=${config.model_type ?? '?'}`,
      modules.length === 0 ? 'no modules.json' : `modules.json types=${modules.map((m) => m.type).join(',')}`,
    ].join('; ');
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `cannot tell which model family ${id} is (${seen}); set "family" for it in the catalog (one of: ${allFamilies().map((f) => f.name).join(', ')})`,
    );
  }
  evidence.push(overrides.family !== undefined ? `family ${adapter.name}: from catalog` : `family ${adapter.name}: detected`);

  const readsText = (adapter.capabilities.inputs ?? ['text']).includes('text');
  if (readsText && !folder.has('tokenizer.json')) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${id}: tokenizer.json is missing in ${dir} (Shoal reads the fast-tokenizer file)`);
  }
  const tokenizerOverrides: Record<string, unknown> = overrides.padding_side === undefined ? {} : { padding_side: overrides.padding_side };
  const tokenizer = readsText ? await TextTokenizer.load(dir, tokenizerOverrides) : null;
  const sbert = await folder.json('sentence_bert_config.json', SentenceBertConfig);
  const st = await folder.json('config_sentence_transformers.json', StConfig);

  const hard = hardMaxLength(config, tokenizer?.info.modelMaxLength ?? null);
  let maxLength: number;
  if (overrides.max_length !== undefined) {
    maxLength = overrides.max_length;
    evidence.push(`max_length ${maxLength}: catalog`);
  } else if (sbert?.max_seq_length !== undefined) {
    maxLength = sbert.max_seq_length;
    evidence.push(`max_length ${maxLength}: sentence_bert_config.json max_seq_length`);
  } else if (tokenizer !== null && tokenizer.info.modelMaxLength !== null) {
    maxLength = tokenizer.info.modelMaxLength;
    evidence.push(`max_length ${maxLength}: tokenizer_config.json model_max_length`);
  } else {
    maxLength = hard ?? 512;
    evidence.push(`max_length ${maxLength}: ${hard === null ? 'default' : 'config.json max_position_embeddings'}`);
  }
  const familyCeiling = adapter.defaultMaxLength;
  if (familyCeiling !== undefined && overrides.max_length === undefined && sbert?.max_seq_length === undefined && maxLength > familyCeiling) {
    maxLength = familyCeiling;
    evidence.push(`max_length ${maxLength}: the ${adapter.name} family's default (set max_length in the catalog for more)`);
  }
  if (hard !== null && maxLength > hard) {
    evidence.push(`max_length capped to ${hard} by the position embeddings`);
    maxLength = hard;
  }

  const prompts = { ...st?.prompts, ...overrides.prompts };
  const rolePrompts: { query?: string; document?: string } = {};
  const queryPrompt = overrides.query_prompt ?? (prompts.query !== undefined ? 'query' : undefined);
  if (queryPrompt !== undefined) rolePrompts.query = queryPrompt;
  const documentPrompt = overrides.document_prompt ?? DOCUMENT_PROMPT_NAMES.find((name) => prompts[name] !== undefined);
  if (documentPrompt !== undefined) rolePrompts.document = documentPrompt;
  if (Object.keys(prompts).length > 0) evidence.push(`prompts ${Object.keys(prompts).join(', ')}: config_sentence_transformers.json`);

  let instructionTemplate = overrides.instruction_template ?? null;
  const queryText = queryPrompt !== undefined ? prompts[queryPrompt] : undefined;
  if (overrides.instruction_template === undefined && queryText !== undefined) {
    const match = INSTRUCT.exec(queryText);
    if (match !== null) {
      instructionTemplate = `${match[1] ?? ''}{instruction}${match[3] ?? ''}`;
      evidence.push('instruction template: derived from the query prompt');
    }
  }

  const paddingSide = overrides.padding_side ?? tokenizer?.info.paddingSide ?? 'right';
  if (tokenizer !== null) evidence.push(`padding ${paddingSide}, pad id ${tokenizer.info.padId}: tokenizer files`);
  const modelType = config?.model_type ?? null;
  const pastInputs = onnx.model === undefined ? [] : await detectPastInputs(folder.path(onnx.model), config);
  if (pastInputs.length > 0) {
    const first = pastInputs[0];
    evidence.push(`KV cache: ${pastInputs.length} past inputs fed empty [batch, ${first?.heads}, 0, ${first?.headDim}] ${first?.dtype}: ONNX graph / config.json`);
  }
  // Only the detected family's adapter is imported (a prep thread never loads the image families for a text model).
  const detected = await (await loadFamily(adapter.name)).detectOptions(facts, tokenizer);
  const profile = ModelProfile.parse({
    id,
    dir,
    family: adapter.name,
    architecture: config?.architectures?.[0] ?? null,
    modelType,
    onnx,
    maxLength,
    hardMaxLength: hard,
    tokenizer:
      tokenizer === null
        ? null
        : {
            padId: tokenizer.info.padId,
            paddingSide,
            truncationSide: tokenizer.info.truncationSide,
            lowercase: sbert?.do_lower_case === true,
          },
    positionRule: positionRuleFor(modelType),
    dims: {
      hidden: config?.hidden_size ?? null,
      heads: config?.num_attention_heads ?? null,
      layers: config?.num_hidden_layers ?? null,
      vocab: config?.vocab_size ?? null,
    },
    pastInputs,
    padTokenId: config?.pad_token_id ?? null,
    prompts,
    defaultPrompt: overrides.default_prompt !== undefined ? overrides.default_prompt : (st?.default_prompt_name ?? null),
    rolePrompts,
    instructionTemplate,
    precision: overrides.precision ?? 'fp32',
    quantization: resolveQuantizationSettings(overrides.quantization),
    memory: overrides.memory ?? {},
    runtime: overrides.runtime ?? {},
    options: { ...detected, ...overrides.options },
    evidence,
  });
  return { profile, tokenizer };
}
