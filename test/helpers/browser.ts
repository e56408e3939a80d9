import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { z } from 'zod';
import { REPO_ROOT } from './shared.js';

/**
 * A real Chromium for the console's tests (puppeteer-core drives the one installed: no browser
 * download). Tests that need it skip, with CHROMIUM_MISSING as the reason, where there is none
 * (CI installs Debian's `chromium`, .ci/run). SHOAL_CHROMIUM names another binary.
 */

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export const CHROMIUM_PATH: string | null = [process.env.SHOAL_CHROMIUM, ...CANDIDATES].find((path): path is string => path !== undefined && path !== '' && existsSync(path)) ?? null;

export const CHROMIUM_MISSING = `skipped: no Chromium found (looked for ${CANDIDATES.join(', ')}; install Debian's chromium or set SHOAL_CHROMIUM)`;

/** Where the screenshots go (gitignored): kept after the run, for a look at what the test saw. */
export const ARTIFACTS_DIR = join(REPO_ROOT, 'test-artifacts', 'console');

export async function launchChromium(): Promise<Browser> {
  if (CHROMIUM_PATH === null) throw new Error(CHROMIUM_MISSING);
  return puppeteer.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  const path = join(ARTIFACTS_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

const AxeResults = z.looseObject({
  violations: z.array(z.looseObject({ id: z.string(), impact: z.string().nullable().optional(), help: z.string(), nodes: z.array(z.looseObject({ target: z.array(z.unknown()) })) })),
  passes: z.array(z.unknown()),
});

let axeSource: Promise<string> | null = null;

/**
 * axe-core run in the page as it is now; the serious and critical violations, as `id: help (targets)`.
 * The page must have been opened after `page.setBypassCSP(true)`: the console's policy allows no
 * script but its own, and axe is injected.
 */
export async function seriousViolations(page: Page): Promise<{ violations: string[]; passes: number }> {
  axeSource ??= readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  const defined: unknown = await page.evaluate('typeof window.axe');
  if (defined !== 'object') await page.addScriptTag({ content: await axeSource });
  const results = AxeResults.parse(await page.evaluate("window.axe.run(document, { resultTypes: ['violations', 'passes'] })"));
  const violations = results.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.id}: ${violation.help} (${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')})`);
  return { violations, passes: results.passes.length };
}

const PaintEntries = z.array(z.object({ name: z.string(), startTime: z.number() }));

/** The page's paint timings (first-paint, first-contentful-paint) in milliseconds from navigation start. */
export async function paintTimes(page: Page): Promise<Record<string, number>> {
  const entries = PaintEntries.parse(await page.evaluate("performance.getEntriesByType('paint').map((entry) => ({ name: entry.name, startTime: entry.startTime }))"));
  return Object.fromEntries(entries.map((entry) => [entry.name, entry.startTime]));
}
