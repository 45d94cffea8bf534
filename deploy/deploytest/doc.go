// Package deploytest keeps larkline's operator-facing artifacts honest against the
// code. It holds tests only; they need no services and run in `make test`.
//
// What the tests hold the artifacts to:
//
//   - Metrics. Every larkline_ metric defined in the Go sources (non-test files: the
//     Name of a prometheus.*Opts literal, Namespace/Subsystem included; a complete
//     larkline_ string literal in a file that imports client_golang's prometheus
//     package, such as the name passed to a local constructor helper or to NewDesc)
//     has exactly one row in the metrics reference of docs/operations.md, whose type,
//     labels and package agree with the code wherever the code states them
//     statically. Every larkline_ name the page, the alert rules or the dashboard
//     mention is a defined metric, or a histogram's _bucket, _sum or _count series.
//     A partial metric name (a prefix glued at run time) is itself a failure: names
//     must be greppable.
//   - deploy/prometheus/alerts.yaml parses; every rule has expr, for, a severity label,
//     a summary and a runbook_url pointing at an anchor of docs/operations.md; the
//     runbook section has one entry per alert and no other.
//   - deploy/grafana/larkline-dashboard.json parses; its panels query only defined
//     metrics through the provisioned data source.
//   - deploy/docker-compose.yaml parses; every LARKLINE_ variable it sets is a
//     configuration key (internal/config), and the configuration each larkline service
//     gets — the mounted example file, the environment and the secret files that
//     deploy/compose/secrets.sh writes — loads and validates with config.Load; the
//     roles it runs exist; Prometheus scrapes every role and loads the alert rules;
//     Grafana is provisioned with the dashboard; deploy/Dockerfile is a multi-stage
//     build that runs as a non-root user and bakes in no secret.
//
// Bounds: the tests read files and parse Go sources; they start nothing (no Docker,
// no broker, no database) and do not evaluate PromQL, so a query's semantics are
// reviewed by people, not by these tests.
package deploytest
