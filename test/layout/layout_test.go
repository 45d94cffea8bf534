package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/larkline/larkline/"

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	Name       string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; is the test run from its own directory?", len(pkgs))
	}
	return pkgs
}

// floor is a package's storey: what it may import lies on its own floor's lower
// neighbours only.
func floor(path string) (string, int) {
	rel := strings.TrimPrefix(path, module)
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "cmd", "test", "deploy": // deploy/deploytest checks the deployment files
		return top, 4
	case "connectors", "processors":
		return top, 3
	case "internal":
		return top, 2
	case "schemas":
		return top, 1
	}
	return top, 0
}

func TestImportsRunOneWay(t *testing.T) {
	for _, p := range listPackages(t) {
		from, fl := floor(p.ImportPath)
		if fl == 0 {
			t.Errorf("%s lies outside cmd, connectors, processors, internal, schemas, test, deploy", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to, tf := floor(imp)
			switch {
			case tf > fl:
				t.Errorf("%s imports %s: an arrow back up (%s → %s)", p.ImportPath, imp, from, to)
			case tf == fl && from != to && fl == 3:
				t.Errorf("%s imports %s: connectors and processors must not import each other", p.ImportPath, imp)
			}
		}
	}
}

func TestEveryPackageHasADocGo(t *testing.T) {
	for _, p := range listPackages(t) {
		if _, err := os.Stat(filepath.Join(p.Dir, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go saying its job", p.ImportPath)
		}
	}
}
