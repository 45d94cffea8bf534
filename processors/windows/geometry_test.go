package windows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
)

func TestIntegrationGeometryIsPinned(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	c.start(version, clock, nil).stop() // first start: 10m windows, 3m grace
	for _, tc := range []struct {
		name    string
		mutate  func(*Options)
		wantKey string
	}{
		{"another window length", func(o *Options) { o.Window = 5 * time.Minute }, "synthesisWindow=5m0s"},
		{"another grace", func(o *Options) { o.Grace = time.Minute }, "synthesisWindowCloseGrace=1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := c.options(version, clock)
			tc.mutate(&o)
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = p.Run(ctx)
			if !errors.Is(err, ErrGeometryChanged) || !strings.Contains(err.Error(), tc.wantKey) ||
				!strings.Contains(err.Error(), "synthesisWindow=10m0s and synthesisWindowCloseGrace=3m0s") {
				t.Fatalf("Run: %v, want %v naming the keys and both values", err, ErrGeometryChanged)
			}
		})
	}
	c.start(version, clock, nil).stop() // the same geometry starts
}
