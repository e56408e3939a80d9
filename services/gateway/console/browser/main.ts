import { forgetToken, onTokenNeeded, storedToken } from './api.js';
import { browser, byId } from './dom.js';
import { hideModels, servedModels, showModels } from './models.js';
import { hideRuns, showRuns } from './runs.js';
import { indexNames, initSearch, useIndex } from './search.js';
import { initUpload, suggestIndexes } from './upload.js';
import type { Json } from './schema.js';

/**
 * The console's entry: one page, four views chosen by the address's hash (#search, #runs,
 * #models, #upload), so each has a link and the back button works. A view's heading takes the
 * focus when it is opened (screen readers announce it); the runs and models views poll only while
 * shown. The sign-in form replaces the view while the gateway waits for a token.
 */

const VIEWS = ['search', 'runs', 'models', 'upload'] as const;
type View = (typeof VIEWS)[number];

function currentView(): View {
  const hash = browser.location.hash.replace(/^#/, '');
  return VIEWS.find((view) => view === hash) ?? 'search';
}

function show(view: View, focus: boolean): void {
  for (const name of VIEWS) byId(`${name}-view`).hidden = name !== view;
  for (const link of Array.from(browser.document.querySelectorAll('nav a[data-view]'))) {
    if (link.dataset.view === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (view === 'runs') showRuns();
  else hideRuns();
  if (view === 'models') showModels();
  else hideModels();
  if (focus) byId(`${view}-title`).focus();
}

/** Settles the question the sign-in form is showing; null while none is. */
let answerToken: ((token: string) => void) | null = null;

/** The sign-in form, shown in place of the view until a token is entered. */
function askForToken(rejected: boolean): Promise<string> {
  for (const name of VIEWS) byId(`${name}-view`).hidden = true;
  byId('token-view').hidden = false;
  byId('token-error').textContent = rejected ? 'The gateway did not accept that token.' : '';
  const input = byId('token-input');
  input.value = '';
  input.focus();
  return new Promise((resolve) => {
    answerToken = resolve;
  });
}

function tokenEntered(): void {
  const token = byId('token-input').value.trim();
  const answer = answerToken;
  if (token === '' || answer === null) return;
  answerToken = null;
  byId('token-view').hidden = true;
  byId('forget-token').hidden = false;
  show(currentView(), true);
  answer(token);
}

async function start(): Promise<void> {
  onTokenNeeded(askForToken);
  byId('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    tokenEntered();
  });
  const forget = byId('forget-token');
  forget.hidden = storedToken() === null;
  forget.addEventListener('click', () => {
    forgetToken();
    forget.hidden = true;
  });
  browser.addEventListener('hashchange', () => show(currentView(), true));
  show(currentView(), false);
  // The first call asks for the token when the gateway wants one; the others wait on the same question.
  let models: Json[] = [];
  try {
    models = await servedModels();
  } catch {
    // The models view shows the failure; search and upload still work with typed names.
  }
  initSearch(models);
  initUpload(models, (index) => {
    useIndex(index);
    browser.location.hash = '#search';
  });
  suggestIndexes(await indexNames());
  browser.document.documentElement.setAttribute('data-ready', 'true');
}

void start();
