package windows

import (
	"errors"
	"reflect"
	"testing"
)

func TestStateCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		v    any
		c    interface {
			Encode(any) ([]byte, error)
			Decode([]byte) (any, error)
		}
	}{
		{"chat", &tableValue{Chat: &chatState{CoveredUntil: 1764470400000, Open: []openWindow{{Start: 1, FirstSeen: 2}, {Start: 600000}}}}, tableCodec{}},
		{"empty chat", &tableValue{Chat: &chatState{CoveredUntil: 5}}, tableCodec{}},
		{"chat with held coverage", &tableValue{Chat: &chatState{CoveredUntil: 5, Open: []openWindow{{Start: 1}},
			Held: []heldCoverage{{Until: 600000, End: 17}, {Until: 1200000, End: 40}}}}, tableCodec{}},
		{"window with ranked versions", &tableValue{Window: &windowState{Start: 1, Msgs: []msgRef{
			{ID: "om_a", At: 1, Hash: "aa", Upd: 1764470400123}, {ID: "om_b", At: 2, Hash: "bb", Upd: 5, Deleted: true}}}}, tableCodec{}},
		{"loop evidence with rank", &loopMsg{Op: opEvidence, Ref: msgRef{ID: "om_a", At: 3, Hash: "h", Upd: 9, Deleted: true}, Deleted: true}, loopCodec{}},
		{"open window", &tableValue{Window: &windowState{Start: 1764470400000, FirstSeen: 9, Msgs: []msgRef{{ID: "om_a", At: 1, Hash: "aa"}, {ID: "om_b", At: 2, Hash: "bb"}}}}, tableCodec{}},
		{"closed marker", &tableValue{Window: &windowState{Start: 1, ClosedAt: 2, Reason: ReasonGraceElapsed, Count: 40, Late: 3}}, tableCodec{}},
		{"loop evidence", &loopMsg{Op: opEvidence, Ref: msgRef{ID: "om_a", At: -5, Hash: "h"}, Deleted: true}, loopCodec{}},
		{"loop close", &loopMsg{Op: opClose, Start: 7, Reason: ReasonGraceElapsedCovered, ClosedAt: 8}, loopCodec{}},
		{"loop opened", &loopMsg{Op: opOpened, Start: 7, FirstSeen: 9}, loopCodec{}},
		{"paged window", &tableValue{Window: &windowState{Start: 1, FirstSeen: 2, Pages: 3,
			Msgs:    []msgRef{{ID: "om_a", At: 1, Hash: "aa", Del: true}},
			Pending: []msgRef{{ID: "om_b", At: 2, Hash: "bb"}}}}, tableCodec{}},
		{"page", &tableValue{Page: &pageState{Refs: []msgRef{{ID: "om_a", At: 1, Hash: "aa"}, {ID: "om_c", At: 3, Hash: "cc", Del: true}}}}, tableCodec{}},
		{"loop seal", &loopMsg{Op: opSeal, Page: 2, Refs: []msgRef{{ID: "om_a", At: 1, Hash: "aa"}}}, loopCodec{}},
		{"loop sealed", &loopMsg{Op: opSealed, Page: 2}, loopCodec{}},
		{"loop collect", &loopMsg{Op: opCollect, Start: 7, ClosedAt: 8, Reason: ReasonGraceElapsed, Page: 1, Pages: 3,
			Refs:    []msgRef{{ID: "om_a", At: 1, Hash: "aa"}},
			Pending: []msgRef{{ID: "om_b", At: 2, Hash: "bb"}},
			Tail:    []msgRef{{ID: "om_c", At: 3, Hash: "cc", Del: true}}}, loopCodec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.c.Encode(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.c.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.v) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tt.v)
			}
			for i := range b { // every truncation is an error, never a panic
				if _, err := tt.c.Decode(b[:i]); !errors.Is(err, ErrStateFormat) {
					t.Fatalf("truncated at %d: %v", i, err)
				}
			}
			if _, err := tt.c.Decode(append(b, 0)); !errors.Is(err, ErrStateFormat) {
				t.Fatalf("trailing byte accepted: %v", err)
			}
		})
	}
}

func TestStateCodecRejectsUnknown(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{"future format", []byte{9, tagChat, 0, 0}},
		{"unknown tag", []byte{formatV1, 7}},
		{"huge list", []byte{formatV1, tagChat, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"page in format 1", []byte{formatV1, tagPage, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := (tableCodec{}).Decode(tt.b); !errors.Is(err, ErrStateFormat) {
				t.Fatalf("want ErrStateFormat, got %v", err)
			}
		})
	}
	if _, err := (loopCodec{}).Decode([]byte{formatV1, 200}); !errors.Is(err, ErrStateFormat) {
		t.Fatalf("unknown loop op: %v", err)
	}
	if _, err := (loopCodec{}).Encode(&loopMsg{Op: "bogus"}); err == nil {
		t.Fatal("encoded an unknown op")
	}
}

// TestStateCodecReadsFormat1 decodes values written before paging (format 1), so a
// processor version's state and loop records survive the upgrade.
func TestStateCodecReadsFormat1(t *testing.T) {
	// window: start 1, first seen 2, closed 0, reason "", count 0, late 0, one ref
	win := []byte{formatV1, tagWindow, 2, 4, 0, 0, 0, 0, 1, 4, 'o', 'm', '_', 'a', 2, 2, 'a', 'a'}
	v, err := tableCodec{}.Decode(win)
	if err != nil {
		t.Fatal(err)
	}
	want := &tableValue{Window: &windowState{Start: 1, FirstSeen: 2, Msgs: []msgRef{{ID: "om_a", At: 1, Hash: "aa"}}}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("format 1 window: got %#v", v.(*tableValue).Window)
	}
	// loop evidence: op 0, ref, deleted, start, first seen, reason, closed at
	loop := []byte{formatV1, 0, 4, 'o', 'm', '_', 'a', 2, 2, 'a', 'a', 1, 0, 0, 0, 0}
	m, err := loopCodec{}.Decode(loop)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&loopMsg{Op: opEvidence, Ref: msgRef{ID: "om_a", At: 1, Hash: "aa"}, Deleted: true}); !reflect.DeepEqual(m, want) {
		t.Fatalf("format 1 loop: got %#v", m)
	}
}

// TestStateCodecReadsFormat2 decodes values written before version ranks and held
// coverage (format 2): ranks are unknown, nothing is held.
func TestStateCodecReadsFormat2(t *testing.T) {
	// chat: covered until 3, one open window (start 1, first seen 2)
	chatV2 := []byte{formatV2, tagChat, 6, 1, 2, 4}
	v, err := tableCodec{}.Decode(chatV2)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&tableValue{Chat: &chatState{CoveredUntil: 3, Open: []openWindow{{Start: 1, FirstSeen: 2}}}}); !reflect.DeepEqual(v, want) {
		t.Fatalf("format 2 chat: got %#v", v.(*tableValue).Chat)
	}
	// page: one ref with the recall flag
	page := []byte{formatV2, tagPage, 1, 4, 'o', 'm', '_', 'a', 2, 2, 'a', 'a', 1}
	v, err = tableCodec{}.Decode(page)
	if err != nil {
		t.Fatal(err)
	}
	want := &tableValue{Page: &pageState{Refs: []msgRef{{ID: "om_a", At: 1, Hash: "aa", Del: true}}}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("format 2 page: got %#v", v.(*tableValue).Page)
	}
	if _, known := want.Page.Refs[0].rank(); known {
		t.Fatal("a format 2 ref has a known rank")
	}
}

func FuzzTableCodec(f *testing.F) {
	for _, v := range []*tableValue{
		{Chat: &chatState{CoveredUntil: 1, Open: []openWindow{{Start: 1}}}},
		{Window: &windowState{Start: 1, Msgs: []msgRef{{ID: "om_a", At: 1, Hash: "h"}}}},
	} {
		b, _ := tableCodec{}.Encode(v)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := tableCodec{}.Decode(b)
		if err != nil {
			return
		}
		again, err := tableCodec{}.Encode(v)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		if _, err := (tableCodec{}).Decode(again); err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
	})
}
