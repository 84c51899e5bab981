// Validate a JSON-lines corpus of Universal Events against the exported JSON Schema
// with ajv's 2020-12 validator in strict mode (discriminator on "type").
// usage: node validate.mjs SCHEMA.json CORPUS.jsonl [INVALID.jsonl]
// Prints one JSON summary line; exits 1 when a valid event fails or an invalid one passes.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";

const [schemaPath, corpusPath, invalidPath] = process.argv.slice(2);
const ajv = new Ajv2020({ strict: true, discriminator: true, allErrors: false });
const validate = ajv.compile(JSON.parse(readFileSync(schemaPath, "utf8")));

function lines(path) {
  return readFileSync(path, "utf8").split("\n").filter((line) => line.trim() !== "");
}

const failures = [];
let valid = 0;
for (const line of lines(corpusPath)) {
  if (validate(JSON.parse(line))) valid += 1;
  else failures.push({ line: line.slice(0, 200), errors: validate.errors });
}
let rejected = 0;
const wronglyAccepted = [];
if (invalidPath) {
  for (const line of lines(invalidPath)) {
    if (validate(JSON.parse(line))) wronglyAccepted.push(line.slice(0, 200));
    else rejected += 1;
  }
}
console.log(JSON.stringify({ valid, failures, rejected, wronglyAccepted }));
process.exit(failures.length === 0 && wronglyAccepted.length === 0 ? 0 : 1);
