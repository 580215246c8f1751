// The original's schema library, driven line by line: each stdin line is a JSON array
// [schema, values]; each stdout line is {"compiled": message or null, "first": [...]} where
// `first` holds, per value, null (valid) or [instancePath, message] of the first error.
// The options are the original's shared instance's (src/validation.js): a fresh instance per
// schema, as one CLI run compiles one (its instance keeps the ids it has seen).
const path = require("node:path");
const readline = require("node:readline");
const { default: Ajv } = require(path.join(process.argv[2], "ajv"));

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const [schema, values] = JSON.parse(line);
  const ajv = new Ajv({ allErrors: false, strict: false, addUsedSchema: false, logger: false });
  let out;
  try {
    const validate = ajv.compile(schema);
    out = {
      compiled: null,
      first: values.map((value) => {
        try {
          if (validate(value)) return null;
          const [e] = validate.errors;
          return [e.instancePath || "/", e.message];
        } catch (err) {
          return ["/", String(err.message)];
        }
      }),
    };
  } catch (err) {
    out = { compiled: String(err.message), first: [] };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
