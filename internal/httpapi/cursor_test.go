package httpapi

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c, err := newCursorCodec(testCursorKey)
	if err != nil {
		t.Fatal(err)
	}
	kind := store.LarkMessageEvidence
	for _, cur := range []store.Cursor{
		{OccurredAt: t0, ID: 1},
		{OccurredAt: t0.Add(123456 * time.Microsecond), ID: 1 << 40},
		{OccurredAt: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC), ID: 7},
		{OccurredAt: time.UnixMicro(0).UTC(), ID: 0},
	} {
		s := c.encode(wsA, kind, cur)
		if _, err := base64.RawURLEncoding.DecodeString(s); err != nil {
			t.Fatalf("cursor %q is not base64url: %v", s, err)
		}
		got, err := c.decode(wsA, kind, s)
		if err != nil || !got.OccurredAt.Equal(cur.OccurredAt) || got.ID != cur.ID {
			t.Fatalf("round trip of %+v: %+v %v", cur, got, err)
		}
		if _, err := c.decode(wsB, kind, s); !errors.Is(err, errInvalidCursor) {
			t.Fatalf("cursor of ws-a accepted for ws-b: %v", err)
		}
		if _, err := c.decode(wsA, store.EvidenceKind{Source: "lark", SourceType: "other"}, s); !errors.Is(err, errInvalidCursor) {
			t.Fatalf("cursor accepted for another kind: %v", err)
		}
	}
}

func TestCursorRejectsEveryBitFlip(t *testing.T) {
	t.Parallel()
	c, _ := newCursorCodec([]byte("a-secret-cursor-key"))
	s := c.encode(wsA, store.LarkMessageEvidence, store.Cursor{OccurredAt: t0, ID: 42})
	raw, _ := base64.RawURLEncoding.DecodeString(s)
	for i := range raw {
		for bit := range 8 {
			b := append([]byte(nil), raw...)
			b[i] ^= 1 << bit
			if _, err := c.decode(wsA, store.LarkMessageEvidence, base64.RawURLEncoding.EncodeToString(b)); !errors.Is(err, errInvalidCursor) {
				t.Fatalf("byte %d bit %d flipped: accepted (%v)", i, bit, err)
			}
		}
	}
}

// FuzzCursorDecode: decoding never panics, and whatever it accepts re-encodes to the
// same string (so only cursors this codec issued are accepted).
func FuzzCursorDecode(f *testing.F) {
	c, _ := newCursorCodec(testCursorKey)
	f.Add(c.encode(wsA, store.LarkMessageEvidence, store.Cursor{OccurredAt: t0, ID: 9}))
	f.Add("")
	f.Add("AAAA")
	f.Add(store.Cursor{OccurredAt: t0, ID: 1}.String())
	f.Fuzz(func(t *testing.T, s string) {
		cur, err := c.decode(ids.WorkspaceID("ws-a"), store.LarkMessageEvidence, s)
		if err != nil {
			if !errors.Is(err, errInvalidCursor) {
				t.Fatalf("error %v does not wrap errInvalidCursor", err)
			}
			return
		}
		if again := c.encode("ws-a", store.LarkMessageEvidence, cur); again != s {
			t.Fatalf("accepted %q, which re-encodes as %q", s, again)
		}
	})
}
