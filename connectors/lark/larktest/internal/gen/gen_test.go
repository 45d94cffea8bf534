package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	lt "github.com/larkline/larkline/connectors/lark/larktest"
)

func generate(t *testing.T, seed uint64) []byte {
	t.Helper()
	sc, err := build(seed)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := sc.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCommittedFileIsTheGeneratorsOutput(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "incident.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(generate(t, defaultSeed), committed) {
		t.Fatal("scenarios/incident.jsonl is stale: run go generate ./connectors/lark/larktest")
	}
}

func TestOtherSeedsMakeValidScenarios(t *testing.T) {
	for _, seed := range []uint64{1, 2, 99} {
		out := generate(t, seed)
		if bytes.Equal(out, generate(t, defaultSeed)) {
			t.Fatalf("seed %d gave the default output", seed)
		}
		if !bytes.Equal(out, generate(t, seed)) {
			t.Fatalf("seed %d is not deterministic", seed)
		}
		if _, err := lt.Parse(bytes.NewReader(out)); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func TestRunWritesTheFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.jsonl")
	if err := run(out, defaultSeed); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, generate(t, defaultSeed)) {
		t.Fatal("run wrote something else")
	}
	if err := run("", defaultSeed); err == nil {
		t.Fatal("empty -out accepted")
	}
}
