package synthesis

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

var t0 = time.Date(2024, 5, 1, 14, 0, 0, 0, time.UTC)

// msg builds a message at sec seconds after t0 with evidence id id and message id om_<id>.
func msg(id int64, sec int, opts ...func(*synth.Message)) synth.Message {
	m := synth.Message{EvidenceID: id, MessageID: ids.MessageID(fmt.Sprintf("om_%d", id)),
		OccurredAt: t0.Add(time.Duration(sec) * time.Second), Text: "x", MessageType: synth.MessageTypeText}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func thread(t string) func(*synth.Message) { return func(m *synth.Message) { m.ThreadID = t } }
func root(id int64) func(*synth.Message) {
	return func(m *synth.Message) { m.RootID = fmt.Sprintf("om_%d", id) }
}
func parentOf(id int64) func(*synth.Message) {
	return func(m *synth.Message) { m.ParentID = fmt.Sprintf("om_%d", id) }
}
func ctxMsg(m *synth.Message) { m.Context = true }

// shape renders groups as key → evidence ids.
func shape(gs []synth.Group) []string {
	var out []string
	for _, g := range gs {
		s := g.Key + ":"
		for _, m := range g.Messages {
			s += fmt.Sprintf(" %d", m.EvidenceID)
		}
		out = append(out, s)
	}
	return out
}

func TestGroupConversations(t *testing.T) {
	gap := 2 * time.Minute
	for _, tc := range []struct {
		name string
		in   []synth.Message
		want []string
	}{
		{name: "empty", in: nil, want: nil},
		{
			name: "thread wins and keeps order",
			in:   []synth.Message{msg(3, 30, thread("omt_a")), msg(1, 10, thread("omt_a")), msg(2, 20)},
			want: []string{"thread:omt_a: 1 3", "prox:om_2: 2"},
		},
		{
			name: "replies join their root, even with the root absent",
			in:   []synth.Message{msg(5, 50, root(100)), msg(6, 60, root(100)), msg(7, 70)},
			want: []string{"conv:om_5: 5 6", "prox:om_7: 7"},
		},
		{
			name: "top-level message plus replies through parent",
			in:   []synth.Message{msg(1, 0), msg(2, 600, parentOf(1)), msg(3, 900, parentOf(2))},
			want: []string{"conv:om_1: 1 2 3"},
		},
		{
			name: "a root message and a reply naming it by root_id",
			in:   []synth.Message{msg(10, 0), msg(11, 1000, root(10))},
			want: []string{"conv:om_10: 10 11"},
		},
		{
			name: "thread joins a reply chain transitively",
			in:   []synth.Message{msg(1, 0, thread("omt_t")), msg(2, 10, parentOf(1)), msg(3, 20, parentOf(2))},
			want: []string{"thread:omt_t: 1 2 3"},
		},
		{
			name: "proximity splits at the gap",
			in:   []synth.Message{msg(1, 0), msg(2, 100), msg(3, 219), msg(4, 400), msg(5, 401)},
			want: []string{"prox:om_1: 1 2 3", "prox:om_4: 4 5"},
		},
		{
			name: "proximity skips over linked conversations",
			in:   []synth.Message{msg(1, 0), msg(2, 10, thread("omt_x")), msg(3, 20), msg(4, 30, thread("omt_x"))},
			want: []string{"prox:om_1: 1 3", "thread:omt_x: 2 4"},
		},
		{
			name: "a lone reply is its own conversation",
			in:   []synth.Message{msg(1, 0), msg(2, 10, root(99)), msg(3, 20)},
			want: []string{"prox:om_1: 1 3", "conv:om_2: 2"},
		},
		{
			name: "context joins the conversation it belongs to",
			in:   []synth.Message{msg(1, -120, ctxMsg), msg(2, 10, parentOf(1)), msg(3, -60, ctxMsg)},
			want: []string{"conv:om_1: 1 2", "prox:om_3: 3"},
		},
		{
			name: "equal times order by evidence id",
			in:   []synth.Message{msg(9, 5), msg(4, 5), msg(6, 5)},
			want: []string{"prox:om_4: 4 6 9"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := groupConversations(tc.in, gap)
			if !slices.Equal(shape(got), tc.want) {
				t.Fatalf("groups = %q, want %q", shape(got), tc.want)
			}
			if !slices.EqualFunc(in, tc.in, func(a, b synth.Message) bool { return a.EvidenceID == b.EvidenceID }) {
				t.Fatal("the input was modified")
			}
			keys := map[string]bool{}
			n := 0
			for _, g := range got {
				if keys[g.Key] {
					t.Fatalf("key %q twice", g.Key)
				}
				keys[g.Key] = true
				n += len(g.Messages)
				if !slices.IsSortedFunc(g.Messages, compareMessages) {
					t.Fatalf("group %q out of order", g.Key)
				}
			}
			if n != len(tc.in) {
				t.Fatalf("%d messages grouped, want %d", n, len(tc.in))
			}
		})
	}
}

// TestGroupsAreAValidRequest checks that grouped messages with context make a request
// synth.ValidateRequest accepts, whatever the mix.
func TestGroupsAreAValidRequest(t *testing.T) {
	var msgs []synth.Message
	for i := int64(1); i <= 60; i++ {
		var opts []func(*synth.Message)
		switch i % 5 {
		case 0:
			opts = append(opts, thread(fmt.Sprintf("omt_%d", i%3)))
		case 1:
			opts = append(opts, root(i-1))
		case 2:
			opts = append(opts, parentOf(i/2))
		}
		msgs = append(msgs, msg(i, int(i)*7, opts...))
	}
	msgs = append(msgs, msg(1000, -30, ctxMsg), msg(1001, -10, ctxMsg, thread("omt_1")))
	req := synth.Request{Workspace: "ws-1", Chat: "oc_1", WindowStart: t0, WindowEnd: t0.Add(10 * time.Minute),
		Groups: groupConversations(msgs, time.Minute)}
	if err := synth.ValidateRequest(req); err != nil {
		t.Fatalf("ValidateRequest: %v", err)
	}
}
