/**
 * The layering check `npm test` runs (`npm run layers`), docs/architecture.md#layers.
 *
 * dependency-cruiser reads src/ with the swc parser (TypeScript 7 ships no JavaScript API for its
 * own parser), which sees `import type` like any import: these rules hold for types too, so a
 * circle is a circle even when it is erased at run time. test/unit/import-graph.test.ts keeps the
 * finer run-time rules between folders.
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'A circle makes two modules one room with two doors: move the shared shape into a leaf module both import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'request-record-is-a-leaf',
      comment:
        'The request record and the shapes stages share import nothing that writes them (pipeline, auth, upstream, observe): types of the routing table and config only.',
      severity: 'error',
      from: { path: '^src/request/' },
      to: {
        path: '^src/',
        // errors.ts: the error catalogue, whose codes a Verdict names (it imports only local-response.ts).
        pathNot: ['^src/request/', '^src/routing/types\\.ts$', '^src/config/(types|policy-types)\\.ts$', '^src/errors\\.ts$'],
      },
    },
    {
      name: 'policy-is-below-its-sources',
      comment:
        'policy/ reads plain values for every source: it never reaches up into a source, the pipeline or the process wiring. It may use auth/ (each method\'s own format parsers, so the reader and the method never disagree).',
      severity: 'error',
      from: { path: '^src/policy/' },
      to: {
        path: [
          '^src/(sources|pipeline|proxy|listeners|upstream|workers|admin|api|observe|cache|control-plane|data-plane)/',
          '^src/(app|cli)\\.ts$',
          // config/ calls policy/ (and attaches file positions): the readers never call back into it.
          '^src/config/(validate-|load|plain-yaml|yaml-reader)',
        ],
      },
    },
    {
      name: 'sources-never-import-the-pipeline',
      comment: 'A source produces configuration; how a request is served is none of its business.',
      severity: 'error',
      from: { path: '^src/sources/' },
      to: { path: '^src/(pipeline|proxy|data-plane)/' },
    },
  ],
  options: {
    parser: 'swc',
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
