package configtest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/larkline/larkline/internal/config"
)

// Want is one expected problem: {key path, fragment of the problem's text}.
type Want [2]string

// CheckProblems asserts err lists exactly the wanted problems (by path, in any
// order), each containing its wanted fragment, and that every path is a real key
// (structural problems, such as an unknown key or a file-level one, excepted).
// With no wants, err must be nil.
func CheckProblems(t testing.TB, err error, wants []Want) {
	t.Helper()
	if len(wants) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("error = %v, want one matching ErrInvalid", err)
	}
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error %T is not *config.Error", err)
	}
	var got []string
	for _, p := range cerr.Problems {
		got = append(got, p.Field)
		structural := strings.HasPrefix(p.Message, "unknown key") || strings.HasPrefix(p.Message, "names no configuration key") ||
			strings.HasSuffix(p.Field, ".yaml") || p.Field == "the top level" || strings.Contains(p.Message, "merge key")
		if !structural && !config.KnownPath(p.Field) {
			t.Errorf("problem path %q names no key", p.Field)
		}
	}
	var wantPaths []string
	for _, w := range wants {
		wantPaths = append(wantPaths, w[0])
	}
	slices.Sort(got)
	slices.Sort(wantPaths)
	if !slices.Equal(got, wantPaths) {
		t.Fatalf("problem paths = %v, want %v\n%v", got, wantPaths, err)
	}
	for _, w := range wants {
		if !slices.ContainsFunc(cerr.Problems, func(p config.Problem) bool {
			return p.Field == w[0] && strings.Contains(p.Keyed(), w[1])
		}) {
			t.Errorf("no problem at %s containing %q in:\n%v", w[0], w[1], err)
		}
	}
}
