// Package config loads, validates and prints larkline's configuration.
//
// One YAML file holds everything: the design's §18 block under
// services.workspace.timeline.lark (same keys, same defaults, with larkline's
// additions) and the kafka, postgres, lark, http, synthesis and log sections. Sources,
// in increasing precedence: [Default] (production-safe, every feature off), the file
// given to [Load], LARKLINE_* environment variables, and a secret's sibling *File key.
//
// [Load] reports every problem at once in one [*Error] of [Problem]s, each naming the
// key path, the value (never a secret's) and where it came from. [Config.Validate]
// holds the file's own rules only; a stage's ranges are its Options.Check (decisions
// D17), which [LoadChecked] and [Config.ValidateWith] run through [StageCheck]s and
// [Config.OptionProblems] reports under the key that set the field. Secrets are
// [Secret]s, printed "[REDACTED]"; [Config.Require] checks a role's own needs.
//
// The package reads one file and the environment, once: it does not watch for
// changes, contact brokers or databases, or check that TLS files exist.
// docs/configuration.md documents the sources, the variables, the secrets, every
// rule and every key; a test keeps it complete.
package config
