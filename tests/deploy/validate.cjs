#!/usr/bin/env node
// Validates Kubernetes objects offline against the Kubernetes API's JSON
// schemas (kubernetes-models; the ServiceMonitor against the Prometheus
// Operator's CRD schema), for tests/python/test_deploy.py.
//
//   node tests/deploy/validate.cjs --modules build/npm FILE.yaml...
//
// --modules: where scripts/setup-npm.sh installed tests/deploy/package.json
// (its node_modules is not beside this script, so packages are resolved from
// there). Prints one JSON object on stdout:
//   {"objects": [{"file", "index", "apiVersion", "kind", "name",
//                 "status": "valid" | "invalid" | "skipped", "error"?}],
//    "valid": N, "invalid": N, "skipped": N}
// and exits 0 when every object is valid, 1 when one is invalid or skipped
// (an unknown kind is not a pass), 2 on a usage or load error.
//
// CommonJS (.cjs), not ESM: createRequire resolves packages from another
// directory, which ESM imports cannot do without flags on node 18/20.
'use strict';

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');

function usage(message) {
  process.stderr.write(`validate.cjs: ${message}\nusage: validate.cjs --modules DIR FILE.yaml...\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let modules = null;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--modules') {
    modules = args[++i];
  } else if (args[i].startsWith('--modules=')) {
    modules = args[i].slice('--modules='.length);
  } else {
    files.push(args[i]);
  }
}
if (!modules) usage('--modules DIR is required');
if (files.length === 0) usage('no YAML file given');

// Resolves as if from DIR/package.json, i.e. through DIR/node_modules.
const requireFrom = createRequire(path.resolve(modules, 'package.json'));
let YAML, appsV1, coreV1, monitoringV1, monitoringError;
try {
  YAML = requireFrom('yaml');
  appsV1 = requireFrom('kubernetes-models/apps/v1');
  coreV1 = requireFrom('kubernetes-models/v1');
} catch (e) {
  usage(`cannot load the npm packages from ${modules} (run scripts/setup-npm.sh): ${e.message}`);
}
try {
  monitoringV1 = requireFrom('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1');
} catch (e) {
  monitoringV1 = null;  // ServiceMonitors are then reported as skipped, with this reason
  monitoringError = e.message;
}

// apiVersion/kind -> model class. Only the kinds deploy/ uses: anything else
// is reported as skipped (and fails the run), never silently passed.
const models = {
  'apps/v1/Deployment': appsV1.Deployment,
  'apps/v1/StatefulSet': appsV1.StatefulSet,
  'v1/Service': coreV1.Service,
  'v1/ConfigMap': coreV1.ConfigMap,
};
if (monitoringV1) models['monitoring.coreos.com/v1/ServiceMonitor'] = monitoringV1.ServiceMonitor;

const objects = [];
for (const file of files) {
  let docs;
  try {
    docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    usage(`cannot read ${file}: ${e.message}`);
  }
  docs.forEach((doc, index) => {
    const entry = { file, index };
    if (doc.errors.length > 0) {
      objects.push({ ...entry, status: 'invalid', error: `YAML: ${doc.errors.map((e) => e.message).join('; ')}` });
      return;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) return;  // an empty document (e.g. after a leading ---)
    entry.apiVersion = obj.apiVersion;
    entry.kind = obj.kind;
    entry.name = obj.metadata && obj.metadata.name;
    const Model = models[`${obj.apiVersion}/${obj.kind}`];
    if (!Model) {
      const why = obj.kind === 'ServiceMonitor' && !monitoringV1
        ? `@kubernetes-models/prometheus-operator not available: ${monitoringError}`
        : `no schema model for ${obj.apiVersion} ${obj.kind} in validate.cjs`;
      objects.push({ ...entry, status: 'skipped', error: why });
      return;
    }
    try {
      // The constructor copies the fields; validate() runs the JSON schema
      // (ajv) and throws with every violation's path on the first failure.
      new Model(obj).validate();
      objects.push({ ...entry, status: 'valid' });
    } catch (e) {
      objects.push({ ...entry, status: 'invalid', error: e.message });
    }
  });
}

const count = (status) => objects.filter((o) => o.status === status).length;
const summary = { objects, valid: count('valid'), invalid: count('invalid'), skipped: count('skipped') };
process.stdout.write(JSON.stringify(summary, null, 1) + '\n');
process.exit(summary.invalid === 0 && summary.skipped === 0 && summary.valid > 0 ? 0 : 1);
