// Package contract checks real msgx output against the contracts msgx
// publishes for integrators in deploy/: the JSON Schemas (draft 2020-12) of
// the msgx.msg and msgx.schd values and the OpenAPI 3.1 document of the
// HTTP API, whose answers' schemas are in deploy/schemas too. The
// end-to-end tests feed it every record and answer they see, so a field the
// code adds without the schema (which closes every object it can) fails
// them. It is used by tests only; the validator is
// github.com/santhosh-tekuri/jsonschema/v6, and [Contracts.Independent]
// checks the same instances with Python's jsonschema (pinned in
// requirements.txt), which loads the schemas as an integrator does: each
// file as it is, known by its $id (Base + "schemas/" + its name), so that
// the relative $refs between them resolve without a registry built by hand.
package contract
