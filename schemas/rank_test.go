package schemas

import (
	"testing"
	"time"
)

func TestEvidenceRank(t *testing.T) {
	t1 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Millisecond)
	live := func(at time.Time) EvidenceRank { return EvidenceRank{SourceUpdatedAt: at} }
	gone := func(at time.Time) EvidenceRank { return EvidenceRank{SourceUpdatedAt: at, Deleted: true} }
	tests := []struct {
		name string
		a, b EvidenceRank
		want int
	}{
		{"later edit", live(t2), live(t1), 1},
		{"earlier edit", live(t1), live(t2), -1},
		{"same instant", live(t1), live(t1), 0},
		{"sub-millisecond difference is equal", live(t1.Add(300 * time.Microsecond)), live(t1), 0},
		{"deletion outranks a later live version", gone(t1), live(t2), 1},
		{"live never outranks a deletion", live(t2), gone(t1), -1},
		{"later deletion", gone(t2), gone(t1), 1},
		{"earlier deletion", gone(t1), gone(t2), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Compare(tt.b); got != tt.want {
				t.Fatalf("Compare = %d, want %d", got, tt.want)
			}
			if got := tt.b.Compare(tt.a); got != -tt.want {
				t.Fatalf("reverse Compare = %d, want %d", got, -tt.want)
			}
			if got := tt.a.Replaces("h2", tt.b, "h1"); got != (tt.want >= 0) {
				t.Fatalf("Replaces with another hash = %v", got)
			}
			if tt.a.Replaces("h1", tt.b, "h1") {
				t.Fatal("the same hash replaced itself")
			}
		})
	}
}
