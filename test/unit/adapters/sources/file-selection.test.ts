import { describe, expect, it } from 'vitest';
import {
  MAX_METADATA_BYTES,
  externalDataFiles,
  isMetadataFile,
  pickOnnxFiles,
  selectDownloadFiles,
  type RepoFile,
} from '../../../../adapters/sources/file-selection.js';

const files = (...paths: string[]): RepoFile[] => paths.map((path) => ({ path }));

/** The layout of an Xenova / onnx-community export. */
const XENOVA = files(
  '.gitattributes',
  'README.md',
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'vocab.txt',
  'onnx/model.onnx',
  'onnx/model_bnb4.onnx',
  'onnx/model_fp16.onnx',
  'onnx/model_int8.onnx',
  'onnx/model_q4.onnx',
  'onnx/model_q4f16.onnx',
  'onnx/model_quantized.onnx',
  'onnx/model_uint8.onnx',
);

describe('isMetadataFile', () => {
  it.each([
    ['config.json', true],
    ['1_Pooling/config.json', true],
    ['tokenizer.json', true],
    ['vocab.txt', true],
    ['merges.txt', true],
    ['sentencepiece.bpe.model', true],
    ['spiece.model', true],
    ['artifact.metadata', true],
    ['onnx/model.onnx', false],
    ['pytorch_model.bin', false],
    ['model.safetensors', false],
    ['tf_model.h5', false],
    ['flax_model.msgpack', false],
    ['openvino/openvino_model.xml', false],
    ['model.gguf', false],
    ['.gitattributes', false],
    ['image.png', false],
  ])('%s → %s', (path, expected) => {
    expect(isMetadataFile({ path })).toBe(expected);
  });

  it('skips metadata files larger than any config or tokenizer', () => {
    expect(isMetadataFile({ path: 'dump.json', size: MAX_METADATA_BYTES + 1 })).toBe(false);
    expect(isMetadataFile({ path: 'tokenizer.json', size: 17_000_000 })).toBe(true);
  });
});

describe('pickOnnxFiles', () => {
  it('picks the plain float graph for fp32', () => {
    expect(pickOnnxFiles(XENOVA, 'fp32')).toEqual(['onnx/model.onnx']);
  });

  it('picks the 4-bit graph for q4 (q4, then bnb4, then q4f16), else the float graph', () => {
    expect(pickOnnxFiles(files('onnx/model.onnx', 'onnx/model_q4f16.onnx', 'onnx/model_q4.onnx', 'onnx/model_quantized.onnx'), 'q4')).toEqual(['onnx/model_q4.onnx']);
    expect(pickOnnxFiles(files('onnx/model.onnx', 'onnx/model_q4f16.onnx'), 'q4')).toEqual(['onnx/model_q4f16.onnx']);
    expect(pickOnnxFiles(files('onnx/model.onnx', 'onnx/model_quantized.onnx'), 'q4')).toEqual(['onnx/model.onnx']);
  });

  it('picks the _quantized graph for int8, then _int8, then _uint8', () => {
    expect(pickOnnxFiles(XENOVA, 'int8')).toEqual(['onnx/model_quantized.onnx']);
    expect(pickOnnxFiles(files('onnx/model.onnx', 'onnx/model_uint8.onnx', 'onnx/model_int8.onnx'), 'int8')).toEqual(['onnx/model_int8.onnx']);
    expect(pickOnnxFiles(files('onnx/model.onnx', 'onnx/model_uint8.onnx'), 'int8')).toEqual(['onnx/model_uint8.onnx']);
  });

  it('picks the fp16 graph for fp16', () => {
    expect(pickOnnxFiles(XENOVA, 'fp16')).toEqual(['onnx/model_fp16.onnx']);
  });

  it('falls back to the float graph when the wanted precision is not shipped', () => {
    expect(pickOnnxFiles(files('onnx/model.onnx', 'onnx/model_fp16.onnx'), 'int8')).toEqual(['onnx/model.onnx']);
    expect(pickOnnxFiles(files('model.onnx'), 'fp16')).toEqual(['model.onnx']);
  });

  it('still finds a graph when only other variants exist', () => {
    expect(pickOnnxFiles(files('onnx/model_q4.onnx'), 'fp32')).toEqual(['onnx/model_q4.onnx']);
  });

  it('prefers onnx/ over the repository root, and the root over other folders', () => {
    expect(pickOnnxFiles(files('model.onnx', 'onnx/model.onnx'))).toEqual(['onnx/model.onnx']);
    expect(pickOnnxFiles(files('exports/model.onnx', 'model.onnx'))).toEqual(['model.onnx']);
  });

  it('picks one graph per component of a split model', () => {
    const clip = files(
      'onnx/text_model.onnx',
      'onnx/text_model_quantized.onnx',
      'onnx/vision_model.onnx',
      'onnx/vision_model_quantized.onnx',
      'onnx/vision_model_fp16.onnx',
    );
    expect(pickOnnxFiles(clip, 'fp32')).toEqual(['onnx/text_model.onnx', 'onnx/vision_model.onnx']);
    expect(pickOnnxFiles(clip, 'int8')).toEqual(['onnx/text_model_quantized.onnx', 'onnx/vision_model_quantized.onnx']);
  });

  it('finds nothing in a repository without ONNX', () => {
    expect(pickOnnxFiles(files('pytorch_model.bin', 'model.safetensors', 'config.json'))).toEqual([]);
  });
});

describe('externalDataFiles', () => {
  const repo = files(
    'onnx/model.onnx',
    'onnx/model.onnx_data',
    'onnx/model.onnx_data_1',
    'onnx/model.onnx.data',
    'onnx/model_fp16.onnx',
    'onnx/model_fp16.onnx_data',
    'onnx/model.json',
  );

  it('lists the data files of a graph and nothing of its variants', () => {
    expect(externalDataFiles(repo, 'onnx/model.onnx').sort()).toEqual(['onnx/model.onnx.data', 'onnx/model.onnx_data', 'onnx/model.onnx_data_1']);
    expect(externalDataFiles(repo, 'onnx/model_fp16.onnx')).toEqual(['onnx/model_fp16.onnx_data']);
  });
});

describe('selectDownloadFiles', () => {
  it('takes metadata and the chosen graph, never weights or other variants', () => {
    const repo = [
      ...XENOVA,
      ...files('pytorch_model.bin', 'model.safetensors', '1_Pooling/config.json', 'onnx/model.onnx_data', 'onnx/model_fp16.onnx_data'),
    ];
    expect(selectDownloadFiles(repo, 'fp32')).toEqual([
      '1_Pooling/config.json',
      'README.md',
      'config.json',
      'special_tokens_map.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'vocab.txt',
      'onnx/model.onnx_data',
      'onnx/model.onnx',
    ]);
    expect(selectDownloadFiles(repo, 'fp16').slice(-2)).toEqual(['onnx/model_fp16.onnx_data', 'onnx/model_fp16.onnx']);
  });

  it('orders graphs last so a cached graph implies a finished download', () => {
    const order = selectDownloadFiles(files('zz.json', 'onnx/text_model.onnx', 'a.txt', 'onnx/vision_model.onnx', 'onnx/vision_model.onnx_data'));
    expect(order).toEqual(['a.txt', 'zz.json', 'onnx/vision_model.onnx_data', 'onnx/text_model.onnx', 'onnx/vision_model.onnx']);
  });
});
