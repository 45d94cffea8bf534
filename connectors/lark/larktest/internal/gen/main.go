// Command gen writes the bundled incident scenario of package larktest.
//
//	go run ./internal/gen -out scenarios/incident.jsonl
//
// The output depends only on -seed: the same seed gives byte-identical output,
// so the committed file can always be regenerated and reviewed as a diff. The
// story (beats) is fixed; the seed decides ids, exact times and the chatter
// around the beats.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
)

const defaultSeed = 4821

func main() {
	out := flag.String("out", "scenarios/incident.jsonl", "file to write (- for stdout)")
	seed := flag.Uint64("seed", defaultSeed, "random seed")
	flag.Parse()
	if err := run(*out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string, seed uint64) error {
	sc, err := build(seed)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := sc.WriteTo(&buf); err != nil {
		return err
	}
	if out == "-" {
		_, err := os.Stdout.Write(buf.Bytes())
		return err
	}
	if out == "" {
		return errors.New("-out is empty")
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
