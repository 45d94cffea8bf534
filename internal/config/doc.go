// Package config loads, validates and prints larkline's configuration.
//
// One YAML file holds everything: the design's §18 block under
// services.workspace.timeline.lark (same keys, same defaults, with larkline's
// additions) and the kafka, postgres, lark, http, synthesis and log sections. The
// defaults are production-safe: every feature is off.
//
// Sources, in increasing precedence:
//
//  1. [Default];
//  2. the YAML file given to [Load]; unknown keys are errors, with a suggestion;
//  3. environment variables: LARKLINE_ followed by the key path's segments,
//     upper-cased as written and joined by "__"
//     (LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW=15m,
//     LARKLINE_KAFKA__BROKERS=a:9092,b:9092). A LARKLINE_ variable that names no
//     key is an error, except LARKLINE_CONFIG (the file path, read by the binary),
//     LARKLINE_TEST_* (the test harness) and the service links Kubernetes injects
//     for a Service named larkline (LARKLINE_SERVICE_*, LARKLINE_PORT*);
//  4. for secrets (lark.appSecret, lark.verificationToken, lark.encryptKey,
//     synthesis.openai.apiKey, kafka.sasl.password, postgres.dsn), a sibling *File
//     key naming a file the secret is read from; setting both is an error.
//
// [Load] reports every problem at once — unknown keys, values that do not parse, and
// every [Config.Validate] rule — in one [*Error] of [Problem]s, each naming the key
// path, the value (never a secret's), and where the value came from.
//
// [Config.Validate] holds the file's own rules only: the shape of a value, the zero
// rule (a key set to 0 where a stage reads 0 as its default), rules across stages,
// and what a switch requires. The ranges and relations of a stage's options are the
// stage's (its Options.Check, docs/decisions.md D17): [LoadChecked] and
// [Config.ValidateWith] take [StageCheck]s that run them on the options the file
// maps onto (cmd/larkline's stageChecks),
// and [Config.OptionProblems] reports a stage's problems under the key that set the
// field, so that the one error also lists them.
//
// Secrets are of type [Secret], which prints as "[REDACTED]" through fmt, slog and
// encoders; [Config.Redacted] returns a copy with the secrets themselves removed and
// [Config.WriteYAML] prints the effective configuration without them.
//
// Bounds: the package reads one file and the environment; it does not watch for
// changes, contact brokers or databases, or check that TLS files exist. Role-specific
// needs (a DSN for a role that writes Postgres) are checked with [Config.Require].
// docs/configuration.md documents every key; a test keeps it complete.
package config
