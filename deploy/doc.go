// Package deploy holds what operators and integrators plug into their own
// systems, and the tests that prove each against the real tool:
//
//   - prometheus/: alerting and recording rules (promtool check and test
//     rules; cmd/msgx runs them in a real Prometheus against a live msgx);
//   - grafana/: the dashboard (its every query is evaluated by that
//     Prometheus);
//   - systemd/: the service units and their environment file
//     (systemd-analyze verify and security);
//   - schemas/ and openapi.yaml: the JSON Schemas of the msgx.msg and
//     msgx.schd values and of the HTTP answers, and the OpenAPI document of
//     the HTTP API (internal/contract validates real records and answers
//     against them, with msgx's Go validator and with Python's jsonschema,
//     which loads the schemas by their $ids as an integrator does).
//
// The package has no code: it exists for its tests (go test ./deploy).
package deploy
