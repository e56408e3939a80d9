import type { Command } from 'commander';
import type { CliApp } from '../app.js';

/**
 * `shoal models cpu`: which kernels this CPU lets onnxruntime run (AVX2, AVX-512, VNNI, AMX) and
 * the int8 weight format Shoal picks for it, as JSON. Loads no model: the answer comes from the
 * CPU's flags, the same ones onnxruntime dispatches on.
 */
export function registerModelsCpu(models: Command, app: CliApp): void {
  models
    .command('cpu')
    .summary('print the CPU kernels onnxruntime can use here and the int8 weight format chosen')
    .description('Print, as JSON, the instruction sets of this CPU that onnxruntime dispatches on (AVX2, AVX-512, VNNI, AMX), the int8 and fp32 kernels they select, and the int8 weight format Shoal uses here.')
    .action(async () => {
      const { thisCpuReport } = await import('../../../adapters/quantize/cpu-features.js');
      app.io.stdout.write(`${JSON.stringify(thisCpuReport(), null, 2)}\n`);
    });
}
