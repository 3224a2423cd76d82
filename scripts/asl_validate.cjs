// Validate state machine definitions with asl-validator (package.json pins it): a JSON object of definitions by
// name on stdin, a JSON object of error lists by name on stdout. One Node process for all of them.
"use strict";
const validator = require("asl-validator");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const results = {};
  for (const [name, definition] of Object.entries(JSON.parse(input))) {
    const result = validator(definition, { checkArn: true, checkPaths: true });
    results[name] = result.errors.map((error) => `${error["Error code"]}: ${error.Message}`);
  }
  process.stdout.write(JSON.stringify(results));
});
