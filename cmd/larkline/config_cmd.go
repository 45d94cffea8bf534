package main

import (
	"context"
	"fmt"
	"io"
)

// runConfig is `larkline config check`: load the configuration exactly as a role
// would (the file, the environment, secret files, the file's rules and every
// stage's), print the effective configuration with every secret masked, and fail
// (exit 1) naming every problem. --require checks keys a deployment needs on top
// (such as postgres.dsn), as the roles do.
func runConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("config", configSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("config "+sub, stderr)
	quiet := fs.Bool("quiet", false, "print nothing when the configuration is valid")
	var required stringList
	fs.Var(&required, "require", "a key that must be set (repeatable), such as postgres.dsn")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, required...)
	if err != nil {
		return fmt.Errorf("configuration has problems: %w", err)
	}
	if *quiet {
		return nil
	}
	// WriteYAML never writes a secret: a set one is "" # redacted.
	return cfg.Redacted().WriteYAML(stdout)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return fmt.Sprint([]string(*l)) }

func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
