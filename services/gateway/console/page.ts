/**
 * The web console's page (GET /ui): the markup of its four views, with no data in it. Kept as a
 * module so the compiled build ships it (package.json `files` holds dist/, not the sources). The
 * script modules (console/browser/) fill the views from the API, with the bearer token the page
 * asks for when the gateway wants one. No inline script or style: the page is served under a
 * strict Content-Security-Policy.
 */

export const CONSOLE_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shoal console</title>
<link rel="stylesheet" href="/ui/console.css">
<script type="module" src="/ui/main.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <p class="brand"><span aria-hidden="true">◆</span> Shoal console</p>
  <nav aria-label="Console sections">
    <ul>
      <li><a href="#search" data-view="search">Search</a></li>
      <li><a href="#runs" data-view="runs">Runs and jobs</a></li>
      <li><a href="#models" data-view="models">Models</a></li>
      <li><a href="#upload" data-view="upload">Upload</a></li>
    </ul>
  </nav>
  <button type="button" id="forget-token" hidden>Forget token</button>
</header>
<main id="main">
  <section id="token-view" aria-labelledby="token-title" hidden>
    <h1 id="token-title" tabindex="-1">Sign in</h1>
    <p>This gateway asks for a bearer token. It is kept in this tab only (session storage) and sent as <code>Authorization: Bearer</code> with every call.</p>
    <form id="token-form" class="stack">
      <label for="token-input">API token</label>
      <input id="token-input" type="password" autocomplete="current-password" required>
      <p id="token-error" class="error" role="alert"></p>
      <button type="submit">Use token</button>
    </form>
  </section>

  <section id="search-view" class="view" aria-labelledby="search-title" hidden>
    <h1 id="search-title" tabindex="-1">Search</h1>
    <form id="search-form" class="grid" role="search">
      <div class="field"><label for="search-index">Index</label><input id="search-index" list="index-names" required autocomplete="off" spellcheck="false"></div>
      <div class="field wide"><label for="search-query">Query</label><input id="search-query" type="search" required></div>
      <div class="field"><label for="search-mode">Mode</label><select id="search-mode"><option value="">index default</option></select></div>
      <div class="field"><label for="search-k">Hits</label><input id="search-k" type="number" min="1" max="100" value="10"></div>
      <div class="field wide"><label for="search-filter">Filter <span class="hint">(e.g. <code>page &lt;= 3</code>)</span></label><input id="search-filter" autocomplete="off" spellcheck="false"></div>
      <div class="field check"><input id="search-rerank" type="checkbox"><label for="search-rerank">Rerank with</label></div>
      <div class="field"><label for="search-rerank-model" class="visually-hidden">Rerank model</label><select id="search-rerank-model" disabled></select></div>
      <div class="field"><button type="submit">Search</button></div>
    </form>
    <datalist id="index-names"></datalist>
    <p id="search-status" class="status" role="status"></p>
    <div class="split">
      <ol id="search-hits" class="hits" aria-label="Hits"></ol>
      <section id="hit-view" class="detail" aria-labelledby="hit-title" hidden>
        <h2 id="hit-title" tabindex="-1">Hit</h2>
        <dl id="hit-facts" class="facts"></dl>
        <p id="hit-link"></p>
        <div id="hit-text" class="text"></div>
      </section>
    </div>
  </section>

  <section id="runs-view" class="view" aria-labelledby="runs-title" hidden>
    <h1 id="runs-title" tabindex="-1">Runs and jobs</h1>
    <p id="runs-status" class="status"></p>
    <p id="runs-error" class="error" role="alert"></p>
    <table id="runs-table">
      <caption>Ingest runs, classification jobs and primitive jobs this gateway accepted, the newest first; updated every 2 seconds.</caption>
      <thead><tr><th scope="col">Id</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Progress</th><th scope="col">Failures</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>

  <section id="models-view" class="view" aria-labelledby="models-title" hidden>
    <h1 id="models-title" tabindex="-1">Models</h1>
    <p id="models-status" class="status"></p>
    <p id="models-error" class="error" role="alert"></p>
    <h2>Memory</h2>
    <p id="memory-text"></p>
    <meter id="memory-meter" min="0" max="1" value="0" aria-labelledby="memory-text"></meter>
    <table id="models-table">
      <caption>Served models; resident ones are loaded in a worker now.</caption>
      <thead><tr><th scope="col">Model</th><th scope="col">Family</th><th scope="col">Operations</th><th scope="col">Resident</th><th scope="col">Memory</th></tr></thead>
      <tbody></tbody>
    </table>
    <table id="lanes-table">
      <caption>Lanes: queued items, batches run and the mean wait in the scheduler queue (from /metrics).</caption>
      <thead><tr><th scope="col">Lane</th><th scope="col">Queued items</th><th scope="col">Batches</th><th scope="col">Mean queue wait</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>

  <section id="upload-view" class="view" aria-labelledby="upload-title" hidden>
    <h1 id="upload-title" tabindex="-1">Upload</h1>
    <form id="upload-form" class="grid">
      <div class="field"><label for="upload-index">Index</label><input id="upload-index" list="index-names" required autocomplete="off" spellcheck="false"></div>
      <div class="field"><label for="upload-model">Embedding model</label><select id="upload-model"><option value="">pipeline default</option></select></div>
      <div class="field wide"><label for="upload-files">Documents</label><input id="upload-files" type="file" multiple required></div>
      <div class="field"><button type="submit">Upload and ingest</button></div>
    </form>
    <section id="upload-run" aria-labelledby="upload-run-title" hidden>
      <h2 id="upload-run-title">Run <code id="upload-run-id"></code></h2>
      <progress id="upload-progress" max="1" value="0" aria-labelledby="upload-run-title"></progress>
      <p id="upload-state" role="status"></p>
      <ul id="upload-failures" class="failures"></ul>
      <p><a id="upload-search" href="#search" hidden>Search this index</a></p>
    </section>
    <p id="upload-error" class="error" role="alert"></p>
  </section>
</main>
</body>
</html>
`;
