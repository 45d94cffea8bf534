package deadletters

import (
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

func TestParseSinceAndFilter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"", time.Time{}, false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"2026-02-28T00:00:00Z", time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	} {
		got, err := ParseSince(tc.in, now)
		if tc.bad != (err != nil) || (err != nil && !errors.Is(err, ErrInvalid)) || !got.Equal(tc.want) {
			t.Errorf("ParseSince(%q) = %v, %v", tc.in, got, err)
		}
	}
	es := []Entry{
		{Stage: ids.StageSink, Reason: "constraint", FailedAt: now.Add(-2 * time.Hour)},
		{Stage: ids.StageSink, Reason: "malformed", FailedAt: now},
		{Stage: ids.StageSynthesis, Reason: "malformed", FailedAt: now},
	}
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{}, 3},
		{Filter{Stage: ids.StageSink}, 2},
		{Filter{Stage: ids.StageSink, Reason: "malformed"}, 1},
		{Filter{Since: now.Add(-time.Hour)}, 2},
		{Filter{Stage: ids.StageWindows}, 0},
	} {
		if got := len(Select(es, tc.f)); got != tc.want {
			t.Errorf("Select(%+v) = %d entries, want %d", tc.f, got, tc.want)
		}
	}
}
