package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/larkline/larkline/schemas"
)

// errIncompatible: `larkline schemas check` found a schema the registry would
// refuse (exit 1).
var errIncompatible = errors.New("schemas check: incompatible with the registry")

// runSchemas is `larkline schemas register` (register every record schema under its
// <topic>-value subject, whatever schemas.autoRegister says) and `larkline schemas
// check` (ask the registry whether each schema may be its subject's next version
// under the subject's compatibility rule; exit 1 naming each refusal and the
// registry's reasons). Both need schemas.registry.url.
func runSchemas(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("schemas", schemasSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("schemas "+sub, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, "schemas.registry.url")
	if err != nil {
		return err
	}
	reg, err := schemas.NewRegistry(registryOptions(cfg).opts)
	if err != nil {
		return err
	}
	codecs, err := newCodecs(cfg)
	if err != nil {
		return err
	}
	var incompatible []error
	for _, s := range codecs.Subjects() {
		switch sub {
		case "register":
			id, err := reg.Register(ctx, s.Subject, s.Schema)
			if err != nil {
				return fmt.Errorf("registering %s: %w", s.Record, err)
			}
			fmt.Fprintf(stdout, "registered  %s  id %d  (%s)\n", s.Subject, id, s.Record)
		case "check":
			switch err := reg.Compatible(ctx, s.Subject, s.Schema); {
			case errors.Is(err, schemas.ErrIncompatibleChange):
				fmt.Fprintf(stdout, "incompatible  %s  (%s)\n", s.Subject, s.Record)
				incompatible = append(incompatible, err)
			case err != nil:
				return fmt.Errorf("checking %s: %w", s.Record, err)
			default:
				fmt.Fprintf(stdout, "compatible  %s  (%s)\n", s.Subject, s.Record)
			}
		}
	}
	if len(incompatible) > 0 {
		return fmt.Errorf("%w: %w", errIncompatible, errors.Join(incompatible...))
	}
	return nil
}
