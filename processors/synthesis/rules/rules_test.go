package rules

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

func newSynth(t testing.TB) *Synthesizer {
	t.Helper()
	s, err := New(Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func describe(drafts []synth.Draft) string {
	var b strings.Builder
	for _, d := range drafts {
		fmt.Fprintf(&b, "  %-10s %v %s %q\n", d.Kind, d.EvidenceIDs, d.OccurredAt.Format("15:04:05"), d.Title)
	}
	return b.String()
}

func TestSynthesizeIncident(t *testing.T) {
	s := newSynth(t)
	req := incidentRequest()
	res, err := s.Synthesize(context.Background(), req)
	if err != nil {
		t.Fatalf("Synthesize: %v", err)
	}
	t.Logf("drafts:\n%s", describe(res.Drafts))

	t.Run("result metadata", func(t *testing.T) {
		if res.Synthesizer != Name || res.PromptVersion != Version || res.Model != "" || res.Usage != (synth.Usage{}) {
			t.Fatalf("metadata = %q %q %q %+v", res.Synthesizer, res.PromptVersion, res.Model, res.Usage)
		}
	})

	t.Run("every draft is valid", func(t *testing.T) {
		if err := synth.ValidateAll(req, res.Drafts); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("every kind is found", func(t *testing.T) {
		found := map[synth.Kind]bool{}
		for _, d := range res.Drafts {
			found[d.Kind] = true
		}
		for _, k := range synth.Kinds() {
			if !found[k] {
				t.Errorf("no %s draft", k)
			}
		}
	})

	t.Run("facts are bound", func(t *testing.T) {
		for _, f := range incidentFacts {
			ok := slices.ContainsFunc(res.Drafts, func(d synth.Draft) bool {
				if d.Kind != f.kind {
					return false
				}
				for _, id := range f.evidence {
					if !slices.Contains(d.EvidenceIDs, id) {
						return false
					}
				}
				return true
			})
			if !ok {
				t.Errorf("no %s draft binds %v (%s)", f.kind, f.evidence, f.what)
			}
		}
	})

	t.Run("noise is never cited", func(t *testing.T) {
		for reason, noise := range incidentNoise {
			for _, d := range res.Drafts {
				for _, id := range noise {
					if slices.Contains(d.EvidenceIDs, id) {
						t.Errorf("%s draft %q cites %s message %d", d.Kind, d.Title, reason, id)
					}
				}
			}
		}
	})

	t.Run("one draft per group and kind", func(t *testing.T) {
		groupOf := map[int64]string{}
		for _, g := range req.Groups {
			for _, m := range g.Messages {
				groupOf[m.EvidenceID] = g.Key
			}
		}
		seen := map[string]bool{}
		for _, d := range res.Drafts {
			g := groupOf[d.EvidenceIDs[0]]
			for _, id := range d.EvidenceIDs {
				if groupOf[id] != g {
					t.Errorf("%s draft mixes groups %s and %s", d.Kind, g, groupOf[id])
				}
			}
			key := g + "/" + string(d.Kind)
			if seen[key] {
				t.Errorf("two %s drafts in group %s", d.Kind, g)
			}
			seen[key] = true
		}
	})

	t.Run("titles, bodies and times come from the evidence", func(t *testing.T) {
		byID := map[int64]synth.Message{}
		for _, g := range req.Groups {
			for _, m := range g.Messages {
				byID[m.EvidenceID] = m
			}
		}
		for _, d := range res.Drafts {
			titled := false
			for _, id := range d.EvidenceIDs {
				m := byID[id]
				if !strings.Contains(d.Body, m.SenderName+": ") {
					t.Errorf("%s body lacks sender %s of evidence %d", d.Kind, m.SenderName, id)
				}
				if m.OccurredAt.Equal(d.OccurredAt) && strings.Contains(collapse(m.Text), strings.TrimSuffix(d.Title, "…")) {
					titled = true
				}
			}
			if !titled {
				t.Errorf("%s title %q is not taken from a cited message at the draft's time", d.Kind, d.Title)
			}
		}
	})

	t.Run("ordered by time", func(t *testing.T) {
		if !slices.IsSortedFunc(res.Drafts, func(a, b synth.Draft) int { return a.OccurredAt.Compare(b.OccurredAt) }) {
			t.Fatal("drafts are not in time order")
		}
	})
}

func TestSynthesizeIsDeterministic(t *testing.T) {
	s := newSynth(t)
	first, err := s.Synthesize(context.Background(), incidentRequest())
	if err != nil {
		t.Fatal(err)
	}
	fingerprints := func(r synth.Result) []string {
		var out []string
		for _, d := range r.Drafts {
			out = append(out, synth.Fingerprint("inc-2024-0501", d))
		}
		return out
	}
	fp := fingerprints(first)
	if len(slices.Compact(slices.Sorted(slices.Values(fp)))) != len(fp) {
		t.Fatalf("fingerprints collide: %v", fp)
	}
	for _, order := range [][]string{
		{gTriage, gDB, gLater},
		{gLater, gDB, gTriage},
		{gDB, gLater, gTriage},
	} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			again, err := s.Synthesize(context.Background(), incidentRequest(order...))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(first, again) {
				t.Fatalf("different output for the same chat:\nfirst:\n%s\nagain:\n%s", describe(first.Drafts), describe(again.Drafts))
			}
			if !slices.Equal(fp, fingerprints(again)) {
				t.Fatal("fingerprints changed")
			}
		})
	}
}

// one builds a request holding a single primary message.
func one(text string) synth.Request {
	return synth.Request{
		Workspace: "ws", Chat: "oc_c", WindowStart: incidentStart, WindowEnd: incidentEnd,
		Groups: []synth.Group{{Key: "g", Messages: []synth.Message{{
			EvidenceID: 1, MessageID: "om_1", SenderName: "Ann", OccurredAt: incidentStart.Add(time.Minute),
			Text: text, MessageType: synth.MessageTypeText,
		}}}},
	}
}

func kindsOf(drafts []synth.Draft) []synth.Kind {
	var out []synth.Kind
	for _, d := range drafts {
		out = append(out, d.Kind)
	}
	return out
}

type singleMessageCase struct {
	text string
	want []synth.Kind // must contain
	not  []synth.Kind // must not contain
}

func singleMessageTexts() []string {
	var out []string
	for _, c := range singleMessageCases {
		out = append(out, c.text)
	}
	return out
}

var singleMessageCases = []singleMessageCase{
	// Impact.
	{"Checkout is down for all EU customers", []synth.Kind{synth.KindImpact}, nil},
	{"about 20% of requests are failing with 503", []synth.Kind{synth.KindImpact}, nil},
	{"订单服务不可用，影响全部用户", []synth.Kind{synth.KindImpact}, nil},
	{"报错率到了8%", []synth.Kind{synth.KindImpact}, nil},
	// Findings.
	{"Found a deadlock in the ledger service", []synth.Kind{synth.KindFinding}, nil},
	{"traces point to the auth service", []synth.Kind{synth.KindFinding}, nil},
	{"定位到是缓存集群节点故障", []synth.Kind{synth.KindFinding}, nil},
	// Decisions.
	{"We'll fail over to the standby region", []synth.Kind{synth.KindDecision}, []synth.Kind{synth.KindMitigation}},
	{"决定先切流到上海机房", []synth.Kind{synth.KindDecision}, []synth.Kind{synth.KindMitigation}},
	{"Let's freeze deploys until this is fixed", []synth.Kind{synth.KindDecision}, nil},
	// Ownership.
	{"Carol is the incident commander now", []synth.Kind{synth.KindOwnership}, nil},
	{"I'm handing over IC to Dave", []synth.Kind{synth.KindOwnership}, nil},
	{"这个问题由我负责跟进", []synth.Kind{synth.KindOwnership}, nil},
	// Mitigations.
	{"Failed over to us-west-2", []synth.Kind{synth.KindMitigation}, []synth.Kind{synth.KindDecision}},
	{"restarted the consumer pods", []synth.Kind{synth.KindMitigation}, nil},
	{"Deploying the hotfix now", []synth.Kind{synth.KindMitigation}, nil},
	{"I'll restart the pods after lunch", nil, []synth.Kind{synth.KindMitigation}},
	{"准备回滚了", []synth.Kind{synth.KindDecision}, []synth.Kind{synth.KindMitigation}},
	{"已扩容到20个实例", []synth.Kind{synth.KindMitigation}, nil},
	{"已经重启了网关", []synth.Kind{synth.KindMitigation}, nil},
	// Root cause.
	{"The root cause was an expired TLS certificate", []synth.Kind{synth.KindRootCause}, nil},
	{"outage caused by a bad config push", []synth.Kind{synth.KindRootCause}, nil},
	{"原因是配置中心推送了错误的开关", []synth.Kind{synth.KindRootCause}, nil},
	// Recovery.
	{"All green, latency back to baseline", []synth.Kind{synth.KindRecovery}, []synth.Kind{synth.KindImpact}},
	{"问题已解决，服务恢复正常", []synth.Kind{synth.KindRecovery}, nil},
	{"still not recovered, error rate 5%", []synth.Kind{synth.KindImpact}, []synth.Kind{synth.KindRecovery}},
	{"还没恢复，继续排查", []synth.Kind{synth.KindImpact}, []synth.Kind{synth.KindRecovery}},
	{"should recover in a few minutes", nil, []synth.Kind{synth.KindRecovery}},
	// Next steps and blockers.
	{"Follow-up: add alerting on pool saturation", []synth.Kind{synth.KindNextStep}, nil},
	{"待办：补充容量规划文档", []synth.Kind{synth.KindNextStep}, nil},
	{"We are blocked on DBA approval for the failover", []synth.Kind{synth.KindBlocker}, nil},
	{"没有权限登录生产数据库，卡住了", []synth.Kind{synth.KindBlocker}, nil},

	// Nothing.
	{"+1", nil, synth.Kinds()},
	{"ok", nil, synth.Kinds()},
	{"OK, thanks!", nil, synth.Kinds()},
	{"thank you all 🙏", nil, synth.Kinds()},
	{"@Bob on it", nil, synth.Kinds()},
	{"收到", nil, synth.Kinds()},
	{"好的，谢谢", nil, synth.Kinds()},
	{"收到了 👍", nil, synth.Kinds()},
	{"👍👍", nil, synth.Kinds()},
	{"。。。", nil, synth.Kinds()},
	{"https://grafana.example.com/d/abc/errors", nil, synth.Kinds()},
	{"see https://wiki.example.com/runbooks/rollback", nil, synth.Kinds()},
	{"Is the DB down?", nil, synth.Kinds()},
	{"any update on the rollback", nil, synth.Kinds()},
	{"要不要先回滚", nil, synth.Kinds()},
	{"是不是数据库挂了？", nil, synth.Kinds()},
	{"who wants coffee", nil, synth.Kinds()},
	{"I'm down for lunch at 1", nil, synth.Kinds()},
	{"", nil, synth.Kinds()},
}

func TestSingleMessages(t *testing.T) {
	s := newSynth(t)
	for _, tt := range singleMessageCases {
		t.Run(tt.text, func(t *testing.T) {
			res, err := s.Synthesize(context.Background(), one(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			got := kindsOf(res.Drafts)
			for _, k := range tt.want {
				if !slices.Contains(got, k) {
					t.Errorf("kinds %v lack %s", got, k)
				}
			}
			for _, k := range tt.not {
				if slices.Contains(got, k) {
					t.Errorf("kinds %v include %s", got, k)
				}
			}
			for _, d := range res.Drafts {
				if !slices.Equal(d.EvidenceIDs, []int64{1}) {
					t.Errorf("evidence %v", d.EvidenceIDs)
				}
			}
		})
	}
}

func TestIneligibleMessagesYieldNothing(t *testing.T) {
	const text = "Rolled back payments-api, error rate back to normal"
	tests := []struct {
		name   string
		mutate func(*synth.Message)
	}{
		{"bot", func(m *synth.Message) { m.FromBot = true }},
		{"deleted", func(m *synth.Message) { m.Deleted = true }},
		{"context", func(m *synth.Message) { m.Context = true; m.OccurredAt = incidentStart.Add(-time.Minute) }},
		{"image", func(m *synth.Message) { m.MessageType = "image" }},
		{"interactive card", func(m *synth.Message) { m.MessageType = "interactive" }},
		{"system", func(m *synth.Message) { m.MessageType = "system" }},
	}
	s := newSynth(t)
	if res, err := s.Synthesize(context.Background(), one(text)); err != nil || len(res.Drafts) == 0 {
		t.Fatalf("the eligible message yields %v, %v", res.Drafts, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := one(text)
			tt.mutate(&req.Groups[0].Messages[0])
			res, err := s.Synthesize(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Drafts) != 0 {
				t.Fatalf("drafts from an ineligible message:\n%s", describe(res.Drafts))
			}
		})
	}
	t.Run("post type counts", func(t *testing.T) {
		req := one(text)
		req.Groups[0].Messages[0].MessageType = synth.MessageTypePost
		if res, _ := s.Synthesize(context.Background(), req); len(res.Drafts) == 0 {
			t.Fatal("a post message yields nothing")
		}
	})
}

func TestRepeatedStatus(t *testing.T) {
	s := newSynth(t)
	req := one("Rolled back payments-api to v2.13.2")
	res, err := s.Synthesize(context.Background(), req)
	if err != nil || len(res.Drafts) != 1 {
		t.Fatalf("Synthesize = %v, %v", res.Drafts, err)
	}
	d := res.Drafts[0]

	t.Run("same title, other entry: dropped", func(t *testing.T) {
		r := req
		r.Existing = []synth.ExistingEntry{{Kind: d.Kind, Title: "rolled back payments-api to v2.13.2!", OccurredAt: incidentStart.Add(-time.Hour), Fingerprint: "fp1:other"}}
		if res, _ := s.Synthesize(context.Background(), r); len(res.Drafts) != 0 {
			t.Fatalf("repeated status produced %s", describe(res.Drafts))
		}
	})
	t.Run("same fingerprint: kept for the worker to deduplicate", func(t *testing.T) {
		r := req
		r.Existing = []synth.ExistingEntry{{Kind: d.Kind, Title: d.Title, OccurredAt: d.OccurredAt, Fingerprint: synth.Fingerprint(req.Workspace, d)}}
		if res, _ := s.Synthesize(context.Background(), r); !reflect.DeepEqual(res.Drafts, []synth.Draft{d}) {
			t.Fatalf("a re-synthesized window lost its draft: %s", describe(res.Drafts))
		}
	})
	t.Run("other kind: kept", func(t *testing.T) {
		r := req
		r.Existing = []synth.ExistingEntry{{Kind: synth.KindDecision, Title: d.Title, Fingerprint: "fp1:x"}}
		if res, _ := s.Synthesize(context.Background(), r); len(res.Drafts) != 1 {
			t.Fatal("an entry of another kind suppressed the draft")
		}
	})
}

func TestBounds(t *testing.T) {
	s := newSynth(t)
	t.Run("long message: title is its strongest sentence, bounded", func(t *testing.T) {
		long := strings.Repeat("We talked about many unrelated things for a while. ", 5) +
			"Root cause: the connection pool default changed from 100 to 10 in the v3 client library upgrade that shipped on Monday along with " +
			strings.Repeat("many other dependency bumps ", 10)
		res, err := s.Synthesize(context.Background(), one(long))
		if err != nil || len(res.Drafts) == 0 {
			t.Fatalf("Synthesize = %v, %v", res.Drafts, err)
		}
		d := res.Drafts[0]
		if d.Kind != synth.KindRootCause || !strings.HasPrefix(d.Title, "Root cause:") || !strings.HasSuffix(d.Title, "…") ||
			utf8.RuneCountInString(d.Title) > DefaultMaxTitleRunes {
			t.Fatalf("title %q (%d runes)", d.Title, utf8.RuneCountInString(d.Title))
		}
	})
	t.Run("many supporters: body bounded, all evidence bound", func(t *testing.T) {
		req := one("x")
		req.Groups[0].Messages = nil
		for i := range 40 {
			req.Groups[0].Messages = append(req.Groups[0].Messages, synth.Message{
				EvidenceID: int64(i + 1), MessageID: ids.MessageID(fmt.Sprintf("om_x%d", i)), SenderName: "Ann",
				OccurredAt: incidentStart.Add(time.Duration(i) * time.Second), MessageType: synth.MessageTypeText,
				Text: "Logs show " + strings.Repeat("a long finding ", 8),
			})
		}
		res, err := s.Synthesize(context.Background(), req)
		if err != nil || len(res.Drafts) != 1 {
			t.Fatalf("Synthesize = %s, %v", describe(res.Drafts), err)
		}
		d := res.Drafts[0]
		if n := utf8.RuneCountInString(d.Body); n > synth.MaxBodyRunes || !strings.Contains(d.Body, "more message(s)") {
			t.Fatalf("body has %d runes:\n%s", n, d.Body)
		}
		if len(d.EvidenceIDs) != 40 {
			t.Fatalf("bound %d of 40 supporting messages", len(d.EvidenceIDs))
		}
		if err := synth.Validate(req, d); err != nil {
			t.Fatal(err)
		}
	})
}

func TestHostileTextStillValidates(t *testing.T) {
	s := newSynth(t)
	for _, text := range []string{
		"Rolled back\x07 payments-api\x00 now",
		"Rolled back \xff\xfe payments-api",
		"回滚已完成\r\n\t验证通过\u2028",
	} {
		req := one(text)
		req.Groups[0].Messages[0].SenderName = "Bob\x1b[31m"
		res, err := s.Synthesize(context.Background(), req)
		if err != nil || len(res.Drafts) == 0 {
			t.Fatalf("%q: %v, %v", text, res.Drafts, err)
		}
		if err := synth.ValidateAll(req, res.Drafts); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

func TestSynthesizeErrors(t *testing.T) {
	s := newSynth(t)
	t.Run("invalid request", func(t *testing.T) {
		req := one("rolled back")
		req.WindowEnd = req.WindowStart
		if _, err := s.Synthesize(context.Background(), req); !errors.Is(err, synth.ErrInvalidRequest) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Synthesize(ctx, one("rolled back")); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("empty request", func(t *testing.T) {
		req := one("x")
		req.Groups = nil
		res, err := s.Synthesize(context.Background(), req)
		if err != nil || len(res.Drafts) != 0 {
			t.Fatalf("Synthesize = %v, %v", res.Drafts, err)
		}
	})
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"bounds", Options{MaxTitleRunes: synth.MaxTitleRunes, MaxSummaryRunes: synth.MaxSummaryRunes}, true},
		{"title too short", Options{MaxTitleRunes: 10}, false},
		{"title too long", Options{MaxTitleRunes: synth.MaxTitleRunes + 1}, false},
		{"summary too long", Options{MaxSummaryRunes: synth.MaxSummaryRunes + 1}, false},
		{"negative", Options{MaxSummaryRunes: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.o)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
				t.Fatalf("New = %v", err)
			}
		})
	}
}

func BenchmarkRulesSynthesize(b *testing.B) {
	s := newSynth(b)
	full := incidentRequest()
	// One 40-message chunk, as the worker sends it (design §14).
	req := full
	req.Groups = nil
	n := 0
	for _, g := range full.Groups {
		var msgs []synth.Message
		for _, m := range g.Messages {
			if !m.Context && n < 40 {
				msgs = append(msgs, m)
				n++
			}
		}
		req.Groups = append(req.Groups, synth.Group{Key: g.Key, Messages: msgs})
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Synthesize(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "messages/op")
}
