// Validates the AsyncAPI document (scripts/check-asyncapi.sh runs it; see docs/asyncapi.md).
//
//   node asyncapi/validate.mjs --modules DIR [DOCUMENT]
//
// DIR holds the pinned node_modules (.cache/asyncapi). DOCUMENT defaults to
// asyncapi/turnstile.asyncapi.yaml. Exit 0 when everything holds, 1 with every problem printed.
//
// 1. Every $ref of the document and of the files it references is local (`#/…`) or a relative
//    path to an existing file inside the repository: no remote or absolute refs.
// 2. @asyncapi/parser parses it and resolves every $ref; any diagnostic of severity error fails
//    (all diagnostics are printed), and no `$ref` may be left in the resolved document.
// 3. The payloads are opaque to the parser (schemaFormat draft-2020-12, docs/asyncapi.md), so
//    each one is compiled here by Ajv's 2020-12 validator (meta-schema check, strict mode) and
//    must be exactly one schemas/*.v1.json file; each file is the payload of exactly one message.
// 4. Every example in schemas/examples/ goes to the message whose payload has its schema's $id:
//    valid/ ones must validate (format assertion on), invalid/ ones must not; the key and the
//    headers the worker would write for a valid one must match the message's key and headers
//    schemas. The document's own message examples must match their headers and payload.
// 5. What the code defines (src/message/mod.rs) is what the document says: the default topic
//    names, header names and content types; turns are received, the rest sent.

import { createRequire } from 'node:module';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FORMAT_2020_12 = 'application/schema+json;version=draft-2020-12';

const args = process.argv.slice(2);
let modules = null;
let docPath = join(ROOT, 'asyncapi', 'turnstile.asyncapi.yaml');
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--modules') modules = args[++i];
  else docPath = resolve(args[i]);
}
if (!modules) {
  console.log('usage: node asyncapi/validate.mjs --modules DIR [DOCUMENT]');
  process.exit(64);
}
const require = createRequire(join(resolve(modules), 'package.json'));
const { Parser, fromFile, DiagnosticSeverity } = require('@asyncapi/parser');
const Ajv2020 = require('ajv/dist/2020').default;
const AjvDraft07 = require('ajv').default;
const addFormats = require('ajv-formats').default;
const { fullFormats } = require('ajv-formats/dist/formats');

const problems = [];
const fail = (msg) => problems.push(msg);
const rel = (p) => relative(ROOT, p) || '.';
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));

// ---- 1. refs: local or relative files only --------------------------------------------------
function checkRefs(file, seen = new Set()) {
  if (seen.has(file)) return;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/["']?\$ref["']?\s*:\s*["']?([^"'\s,}]+)/g)) {
    const ref = m[1];
    if (ref.startsWith('#')) continue;
    const target = ref.split('#')[0];
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || isAbsolute(target)) {
      fail(`${rel(file)}: $ref "${ref}" is not a relative path (no remote or absolute refs)`);
      continue;
    }
    const abs = resolve(dirname(file), target);
    if (relative(ROOT, abs).startsWith('..')) fail(`${rel(file)}: $ref "${ref}" leaves the repository`);
    else if (!existsSync(abs)) fail(`${rel(file)}: $ref "${ref}" names a missing file`);
    else checkRefs(abs, seen);
  }
}
if (!existsSync(docPath)) {
  console.log(`check-asyncapi: no document at ${docPath}`);
  process.exit(1);
}
checkRefs(docPath);
if (problems.length > 0) {
  // Before the parser: it would try to fetch a remote ref.
  for (const p of problems) console.log(`  - ${p}`);
  console.log(`check-asyncapi: FAILED: ${rel(docPath)}: ${problems.length} bad $ref(s)`);
  process.exit(1);
}

// ---- 2. parse and resolve -------------------------------------------------------------------
const parser = new Parser();
const { document, diagnostics } = await fromFile(parser, docPath).parse();
let errors = 0;
for (const d of diagnostics) {
  const sev = DiagnosticSeverity[d.severity] ?? String(d.severity);
  if (d.severity === DiagnosticSeverity.Error) errors++;
  const where = d.path?.length ? d.path.join('.') : '(document)';
  console.log(`  [${sev}] ${d.code} at ${where}: ${d.message}`);
}
if (errors > 0 || !document) {
  for (const p of problems) console.log(`  - ${p}`);
  console.log(`check-asyncapi: FAILED: ${rel(docPath)}: ${errors} parser error(s)`);
  process.exit(1);
}
const resolved = document.json();
(function noRefLeft(v, path) {
  if (Array.isArray(v)) v.forEach((x, i) => noRefLeft(x, `${path}/${i}`));
  else if (v && typeof v === 'object') {
    if ('$ref' in v) fail(`unresolved $ref left at ${path}: ${v.$ref}`);
    for (const [k, x] of Object.entries(v)) noRefLeft(x, `${path}/${k}`);
  }
})(resolved, '#');

// ---- 3. payloads: compiled as 2020-12, identical to schemas/*.v1.json ----------------------
const stripParserIds = (v) => {
  if (Array.isArray(v)) return v.map(stripParserIds);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v).filter(([k]) => k !== 'x-parser-schema-id').map(([k, x]) => [k, stripParserIds(x)]),
    );
  }
  return v;
};
// Strict about unknown keywords (typos); `required` inside `oneOf` branches is plain 2020-12.
const ajvOptions = { strict: true, strictRequired: false, strictTypes: false, strictTuples: false, allErrors: true, allowUnionTypes: true };
// ajv-formats' date-time also takes a space between date and time (RFC 3339's note); the
// contract, the Rust decoder (src/message/wire.rs) and the jsonschema crate take only T or t
// (schemas/examples/invalid/turn.sent-at-space-separator.json).
const dateTime = {
  validate: (s) => /^.{10}[Tt]/.test(s) && fullFormats['date-time'].validate(s),
  compare: fullFormats['date-time'].compare,
};
const withFormats = (ajv) => {
  addFormats(ajv);
  ajv.addFormat('date-time', dateTime);
  return ajv;
};
const ajvFiles = withFormats(new Ajv2020(ajvOptions)); // the schemas/ files as written
const ajvResolved = withFormats(new Ajv2020(ajvOptions)); // the payloads as the parser resolved them
ajvResolved.addKeyword('x-parser-schema-id');
const ajv07 = withFormats(new AjvDraft07({ strict: false, allErrors: true, allowUnionTypes: true }));
// The parser returns the document's schemas (headers, keys) with its own annotations.
ajv07.addKeyword('x-parser-schema-id');

// The file with its local refs inlined the way the parser's resolver does it: the `$ref` object
// is replaced by its target, so a sibling keyword of `$ref` (meaningful in 2020-12) is dropped.
// Annotations may go (noted); anything else would change validation, so it fails.
const ANNOTATIONS = new Set(['description', 'title', '$comment', 'examples', 'deprecated']);
const notes = [];
function inlineLikeParser(root, file) {
  const walk = (v, path, depth) => {
    if (depth > 64) throw new Error(`schemas/${file}: refs nest deeper than 64 at ${path}`);
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}/${i}`, depth));
    if (!v || typeof v !== 'object') return v;
    if (typeof v.$ref === 'string' && v.$ref.startsWith('#/')) {
      for (const k of Object.keys(v)) {
        if (k === '$ref') continue;
        if (ANNOTATIONS.has(k)) notes.push(`schemas/${file} ${path}: "${k}" beside $ref is dropped by the parser's resolver (an annotation: validation unchanged)`);
        else fail(`schemas/${file} ${path}: "${k}" beside $ref would be dropped by the parser's resolver and change validation; wrap the $ref in allOf`);
      }
      const target = v.$ref.slice(2).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'))
        .reduce((o, t) => (o === undefined ? undefined : o[t]), root);
      if (target === undefined) { fail(`schemas/${file} ${path}: $ref ${v.$ref} points nowhere`); return v; }
      return walk(target, v.$ref, depth + 1);
    }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, `${path}/${k}`, depth)]));
  };
  return walk(root, '#', 0);
}

const schemaFiles = readdirSync(join(ROOT, 'schemas')).filter((f) => /^\w+\.v\d+\.json$/.test(f));
const files = new Map(schemaFiles.map((f) => [f, readJson(join(ROOT, 'schemas', f))]));
const byId = new Map(); // payload $id -> { channel, message, validate, validateFile, file }
const messages = new Map(); // message id -> message
for (const channel of document.channels()) {
  const chMessages = channel.messages().all();
  if (chMessages.length !== 1) fail(`channel ${channel.id()}: ${chMessages.length} messages, expected 1`);
  for (const message of chMessages) {
    const id = message.id();
    messages.set(id, message);
    const raw = message.json().payload;
    if (!raw) { fail(`message ${id}: no payload`); continue; }
    if (raw.schemaFormat !== FORMAT_2020_12) {
      fail(`message ${id}: payload schemaFormat is ${JSON.stringify(raw.schemaFormat)}, expected ${FORMAT_2020_12}`);
      continue;
    }
    const schema = stripParserIds(raw.schema);
    const file = schemaFiles.find((f) => files.get(f).$id === schema.$id);
    if (!file) { fail(`message ${id}: payload $id ${schema.$id} is no file of schemas/`); continue; }
    if (byId.has(schema.$id)) { fail(`schemas/${file} is the payload of two messages`); continue; }
    if (!isDeepStrictEqual(schema, inlineLikeParser(files.get(file), file))) {
      fail(`message ${id}: resolved payload is not schemas/${file} (with its refs inlined)`);
    }
    let validate, validateFile;
    try {
      validateFile = ajvFiles.compile(files.get(file));
      validate = ajvResolved.compile(raw.schema);
    } catch (e) {
      fail(`message ${id}: payload schemas/${file} does not compile as JSON Schema 2020-12: ${e.message}`);
      continue;
    }
    byId.set(schema.$id, { channel, message, validate, validateFile, file });
  }
}
for (const [f, s] of files) {
  if (![...byId.values()].some((e) => e.file === f)) fail(`schemas/${f} (${s.$id}) is the payload of no message`);
}

const explain = (errs) => (errs ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
const compile07 = (schema, what) => {
  try {
    return ajv07.compile(schema);
  } catch (e) {
    fail(`${what}: schema does not compile: ${e.message}`);
    return null;
  }
};
const headerValidators = new Map();
const keyValidators = new Map();
for (const [id, message] of messages) {
  const headers = message.json().headers;
  if (headers) headerValidators.set(id, compile07(headers, `message ${id} headers`));
  const key = message.bindings().get('kafka')?.json()?.key;
  if (key) keyValidators.set(id, compile07(key, `message ${id} kafka key`));
  else fail(`message ${id}: no kafka binding key`);
}

// ---- 5. the code's names --------------------------------------------------------------------
const mod = readFileSync(join(ROOT, 'src', 'message', 'mod.rs'), 'utf8');
const constant = (name) => {
  const m = mod.match(new RegExp(`pub const ${name}: &str = "([^"]*)";`));
  if (!m) fail(`src/message/mod.rs: no constant ${name}`);
  return m?.[1];
};
const topicDefault = (field) => {
  const m = mod.match(new RegExp(`${field}: "([^"]+)"\\.into\\(\\)`));
  if (!m) fail(`src/message/mod.rs: no default for Topics::${field}`);
  return m?.[1];
};
const H = { outputId: constant('HEADER_OUTPUT_ID'), turnId: constant('HEADER_TURN_ID'), contentType: constant('HEADER_CONTENT_TYPE') };
const CT = { json: constant('CONTENT_TYPE_JSON'), cloudevents: constant('CONTENT_TYPE_CLOUDEVENTS') };
// payload $id -> what the code says about its topic, its direction and its headers
const expected = {
  'urn:turnstile:schema:turn.v1': { topic: topicDefault('inbound'), action: 'receive', contentType: CT.json, headers: null },
  'urn:turnstile:schema:reply.v1': { topic: topicDefault('replies'), action: 'send', contentType: CT.json, headers: [H.outputId, H.turnId, H.contentType] },
  'urn:turnstile:schema:event.v1': { topic: topicDefault('events'), action: 'send', contentType: CT.cloudevents, headers: [H.outputId, H.turnId, H.contentType] },
  'urn:turnstile:schema:dead_letter.v1': { topic: topicDefault('dead_letters'), action: 'send', contentType: CT.json, headers: [H.outputId, H.turnId, H.contentType] },
};
for (const [sid, want] of Object.entries(expected)) {
  const entry = byId.get(sid);
  if (!entry) { fail(`no message has the payload ${sid}`); continue; }
  const { message, channel } = entry;
  const id = message.id();
  if (channel.address() !== want.topic) fail(`channel ${channel.id()}: address ${channel.address()}, the code's default topic is ${want.topic}`);
  const topic = channel.bindings().get('kafka')?.json()?.topic;
  if (topic !== undefined && topic !== channel.address()) fail(`channel ${channel.id()}: kafka binding topic ${topic} differs from its address`);
  const ops = channel.operations().all();
  if (ops.length === 0) fail(`channel ${channel.id()}: no operation`);
  for (const op of ops) if (op.action() !== want.action) fail(`operation ${op.id()}: action ${op.action()}, expected ${want.action}`);
  if (message.contentType() !== want.contentType) fail(`message ${id}: contentType ${message.contentType()}, the code writes ${want.contentType}`);
  const headers = message.json().headers;
  if (want.headers) {
    const names = Object.keys(headers?.properties ?? {}).sort();
    if (!isDeepStrictEqual(names, [...want.headers].sort())) fail(`message ${id}: headers ${names}, the code writes ${want.headers}`);
    const ct = headers?.properties?.[H.contentType]?.const;
    if (ct !== want.contentType) fail(`message ${id}: ${H.contentType} header const ${ct}, the code writes ${want.contentType}`);
  }
}

// ---- 4. examples ----------------------------------------------------------------------------
const headersFor = (prefix, body) => {
  // What src/worker/committer.rs writes for this output (turn_id only when the turn decoded).
  if (prefix === 'reply') return { [H.outputId]: body.output_id, [H.turnId]: body.turn_id, [H.contentType]: CT.json };
  if (prefix === 'event') return { [H.outputId]: body.id, [H.turnId]: body.turnid, [H.contentType]: CT.cloudevents };
  if (prefix === 'dead_letter') return { [H.outputId]: body.output_id, [H.contentType]: CT.json };
  return null;
};
const keyFor = (prefix, body) => {
  if (prefix === 'event') return body.subject;
  if (prefix === 'dead_letter') return body.original.key ?? '';
  return `${body.tenant_id}/${body.agent_id}/${body.session_id}`;
};
const counts = { valid: 0, invalid: 0 };
for (const kind of ['valid', 'invalid']) {
  const dir = join(ROOT, 'schemas', 'examples', kind);
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.json')).sort()) {
    const prefix = f.split('.')[0];
    const entry = byId.get(`urn:turnstile:schema:${prefix}.v1`);
    if (!entry) { fail(`schemas/examples/${kind}/${f}: no message has the payload ${prefix}.v1`); continue; }
    const body = readJson(join(dir, f));
    const ok = entry.validate(body);
    counts[kind]++;
    if (entry.validateFile(body) !== ok) fail(`schemas/examples/${kind}/${f}: schemas/${entry.file} and message ${entry.message.id()}'s resolved payload disagree`);
    if (kind === 'valid' && !ok) fail(`schemas/examples/valid/${f}: rejected by message ${entry.message.id()}'s payload: ${explain(entry.validate.errors)}`);
    if (kind === 'invalid' && ok) fail(`schemas/examples/invalid/${f}: accepted by message ${entry.message.id()}'s payload`);
    if (kind !== 'valid') continue;
    const id = entry.message.id();
    const vk = keyValidators.get(id);
    const key = keyFor(prefix, body);
    if (vk && !vk(key)) fail(`schemas/examples/valid/${f}: its key ${JSON.stringify(key)} fails message ${id}'s key schema: ${explain(vk.errors)}`);
    const vh = headerValidators.get(id);
    const hs = headersFor(prefix, body);
    if (vh && hs && !vh(hs)) fail(`schemas/examples/valid/${f}: the worker's headers fail message ${id}'s headers schema: ${explain(vh.errors)}`);
  }
}
let docExamples = 0;
for (const [id, message] of messages) {
  const entry = [...byId.values()].find((e) => e.message === message);
  for (const ex of message.examples().all()) {
    docExamples++;
    const name = `message ${id} example ${ex.name() ?? '?'}`;
    if (ex.hasPayload() && entry && !entry.validate(ex.payload())) fail(`${name}: payload: ${explain(entry.validate.errors)}`);
    const vh = headerValidators.get(id);
    if (ex.hasHeaders() && vh && !vh(ex.headers())) fail(`${name}: headers: ${explain(vh.errors)}`);
    if (ex.hasHeaders() && ex.hasPayload()) {
      const p = ex.payload();
      const outId = p.output_id ?? p.id;
      if (ex.headers()[H.outputId] !== outId) fail(`${name}: ${H.outputId} header ${ex.headers()[H.outputId]} is not the payload's ${outId}`);
    }
  }
}

for (const n of notes) console.log(`  [note] ${n}`);
if (problems.length > 0) {
  for (const p of problems) console.log(`  - ${p}`);
  console.log(`check-asyncapi: FAILED: ${rel(docPath)}: ${problems.length} problem(s)`);
  process.exit(1);
}
console.log(
  `check-asyncapi: ok: ${rel(docPath)}: AsyncAPI ${document.version()}, ${document.channels().length} channels, ` +
    `${document.operations().length} operations, ${messages.size} messages; ` +
    `${counts.valid} valid and ${counts.invalid} invalid schema examples, ${docExamples} document examples checked`,
);
