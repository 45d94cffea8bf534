package synth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

var (
	winStart = time.Date(2024, 5, 1, 14, 0, 0, 0, time.UTC)
	winEnd   = winStart.Add(10 * time.Minute)
)

func testRequest() Request {
	return Request{
		Workspace:   "ws-1",
		Chat:        "oc_chat1",
		WindowStart: winStart,
		WindowEnd:   winEnd,
		Groups: []Group{
			{Key: "thread:t1", Messages: []Message{
				{EvidenceID: 1, MessageID: "om_1", OccurredAt: winStart.Add(-2 * time.Minute), Text: "earlier", Context: true},
				{EvidenceID: 2, MessageID: "om_2", OccurredAt: winStart.Add(time.Minute), Text: "error rate 5%"},
				{EvidenceID: 3, MessageID: "om_3", OccurredAt: winStart.Add(2 * time.Minute), Text: "bot card", FromBot: true},
			}},
			{Key: "prox:1", Messages: []Message{
				{EvidenceID: 4, MessageID: "om_4", OccurredAt: winStart.Add(3 * time.Minute), Text: "", Deleted: true},
				{EvidenceID: 5, MessageID: "om_5", OccurredAt: winStart.Add(4 * time.Minute), Text: "rolled back"},
			}},
		},
		Existing: []ExistingEntry{{Kind: KindImpact, Title: "old", OccurredAt: winStart.Add(-time.Hour)}},
	}
}

func TestValidateRequest(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Request)
		want   string // substring of the error; "" means valid
	}{
		{"valid", func(*Request) {}, ""},
		{"no groups", func(r *Request) { r.Groups = nil }, ""},
		{"bad workspace", func(r *Request) { r.Workspace = "" }, "workspace"},
		{"bad chat", func(r *Request) { r.Chat = "chat1" }, "chat id"},
		{"inverted window", func(r *Request) { r.WindowEnd = r.WindowStart }, "window"},
		{"zero window", func(r *Request) { r.WindowStart = time.Time{} }, "window"},
		{"empty group key", func(r *Request) { r.Groups[1].Key = "" }, "empty key"},
		{"duplicate group key", func(r *Request) { r.Groups[1].Key = "thread:t1" }, "appears twice"},
		{"zero evidence id", func(r *Request) { r.Groups[0].Messages[1].EvidenceID = 0 }, "evidence id 0"},
		{"duplicate evidence id", func(r *Request) { r.Groups[1].Messages[1].EvidenceID = 2 }, "evidence id 2 appears twice"},
		{"bad message id", func(r *Request) { r.Groups[0].Messages[1].MessageID = "x" }, "message id"},
		{"primary before window", func(r *Request) { r.Groups[0].Messages[1].OccurredAt = winStart.Add(-time.Second) }, "outside the window"},
		{"primary at window end", func(r *Request) { r.Groups[0].Messages[1].OccurredAt = winEnd }, "outside the window"},
		{"context after window", func(r *Request) { r.Groups[0].Messages[0].OccurredAt = winEnd }, "context evidence 1"},
		{"existing unknown kind", func(r *Request) { r.Existing[0].Kind = "gossip" }, "unknown kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := testRequest()
			tt.mutate(&req)
			err := ValidateRequest(req)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateRequest: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateRequest = %v, want ErrInvalidRequest mentioning %q", err, tt.want)
			}
			if IsRetryable(err) {
				t.Fatal("an invalid request must not be retryable")
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := Draft{Kind: KindMitigation, Title: "Rolled back", Body: "line 1\nline 2\tx", OccurredAt: winStart.Add(4 * time.Minute), EvidenceIDs: []int64{5, 2}}
	tests := []struct {
		name   string
		mutate func(*Draft)
		want   string
	}{
		{"valid", func(*Draft) {}, ""},
		{"title at bound", func(d *Draft) { d.Title = strings.Repeat("回", MaxTitleRunes) }, ""},
		{"body at bound", func(d *Draft) { d.Body = strings.Repeat("b", MaxBodyRunes) }, ""},
		{"window start inclusive", func(d *Draft) { d.OccurredAt = winStart }, ""},
		{"unknown kind", func(d *Draft) { d.Kind = "chatter" }, "unknown kind"},
		{"empty title", func(d *Draft) { d.Title = "  " }, "empty title"},
		{"long title", func(d *Draft) { d.Title = strings.Repeat("回", MaxTitleRunes+1) }, "title has 201 runes"},
		{"title newline", func(d *Draft) { d.Title = "a\nb" }, "control character"},
		{"title invalid utf8", func(d *Draft) { d.Title = "a\xffb" }, "UTF-8"},
		{"long body", func(d *Draft) { d.Body = strings.Repeat("b", MaxBodyRunes+1) }, "body has 2001 runes"},
		{"body NUL", func(d *Draft) { d.Body = "a\x00" }, "control character"},
		{"before window", func(d *Draft) { d.OccurredAt = winStart.Add(-time.Nanosecond) }, "outside the window"},
		{"window end exclusive", func(d *Draft) { d.OccurredAt = winEnd }, "outside the window"},
		{"no evidence", func(d *Draft) { d.EvidenceIDs = nil }, "no evidence"},
		{"repeated evidence", func(d *Draft) { d.EvidenceIDs = []int64{5, 5} }, "repeated"},
		{"context evidence", func(d *Draft) { d.EvidenceIDs = []int64{1} }, "evidence id 1 is not a citable"},
		{"bot evidence", func(d *Draft) { d.EvidenceIDs = []int64{3} }, "evidence id 3 is not a citable"},
		{"deleted evidence", func(d *Draft) { d.EvidenceIDs = []int64{4} }, "evidence id 4 is not a citable"},
		{"unknown evidence", func(d *Draft) { d.EvidenceIDs = []int64{99} }, "evidence id 99"},
	}
	req := testRequest()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			d.EvidenceIDs = append([]int64(nil), good.EvidenceIDs...)
			tt.mutate(&d)
			err := Validate(req, d)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOutput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidOutput mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "Rolled back") {
				t.Fatal("validation errors must not quote draft text")
			}
		})
	}
	t.Run("ValidateAll names the index", func(t *testing.T) {
		bad := good
		bad.EvidenceIDs = []int64{1}
		err := ValidateAll(req, []Draft{good, bad})
		if !errors.Is(err, ErrInvalidOutput) || !strings.HasPrefix(err.Error(), "entry 1:") {
			t.Fatalf("ValidateAll = %v", err)
		}
		if err := ValidateAll(req, []Draft{good, good}); err != nil {
			t.Fatalf("ValidateAll(valid) = %v", err)
		}
	})
}

func TestValidateSummary(t *testing.T) {
	entries := []VisibleEntry{{Kind: KindImpact, Title: "x", OccurredAt: winStart, Status: StatusDraft}}
	reqTests := []struct {
		name string
		req  SummaryRequest
		ok   bool
	}{
		{"valid", SummaryRequest{Workspace: "ws-1", Entries: entries}, true},
		{"no entries", SummaryRequest{Workspace: "ws-1"}, false},
		{"bad workspace", SummaryRequest{Workspace: "a/b", Entries: entries}, false},
		{"hidden entry", SummaryRequest{Workspace: "ws-1", Entries: []VisibleEntry{{Kind: KindImpact, Title: "x", Status: "hidden"}}}, false},
		{"unknown kind", SummaryRequest{Workspace: "ws-1", Entries: []VisibleEntry{{Kind: "x", Title: "x", Status: StatusDraft}}}, false},
	}
	for _, tt := range reqTests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateSummaryRequest(tt.req)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidRequest)) {
				t.Fatalf("ValidateSummaryRequest = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	textTests := []struct {
		name string
		text string
		ok   bool
	}{
		{"valid", "Status: recovered.\nOwner: Alice", true},
		{"empty", " \n", false},
		{"too long", strings.Repeat("字", MaxSummaryRunes+1), false},
		{"control", "a\x07b", false},
	}
	for _, tt := range textTests {
		t.Run("text "+tt.name, func(t *testing.T) {
			err := ValidateSummary(tt.text)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidOutput)) {
				t.Fatalf("ValidateSummary = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := Draft{Kind: KindMitigation, Title: "Rolled back checkout", EvidenceIDs: []int64{7, 3, 9}, OccurredAt: winStart}
	fp := Fingerprint("ws-1", base)
	if !strings.HasPrefix(fp, FingerprintVersion+":") || len(fp) != len(FingerprintVersion)+1+32 {
		t.Fatalf("fingerprint %q has the wrong shape", fp)
	}
	same := []struct {
		name string
		d    Draft
	}{
		{"evidence order", Draft{Kind: KindMitigation, Title: base.Title, EvidenceIDs: []int64{9, 3, 7}}},
		{"title wording", Draft{Kind: KindMitigation, Title: "Checkout rolled back to v1.2", EvidenceIDs: []int64{3, 7, 9}}},
		{"extra supporting evidence", Draft{Kind: KindMitigation, Title: base.Title, EvidenceIDs: []int64{3, 7, 9, 11}}},
		{"body and time", Draft{Kind: KindMitigation, Title: base.Title, Body: "x", OccurredAt: winEnd, EvidenceIDs: []int64{3}}},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			if got := Fingerprint("ws-1", tt.d); got != fp {
				t.Fatalf("Fingerprint = %q, want %q", got, fp)
			}
		})
	}
	differ := []struct {
		name string
		ws   ids.WorkspaceID
		d    Draft
	}{
		{"kind", "ws-1", Draft{Kind: KindRecovery, Title: base.Title, EvidenceIDs: base.EvidenceIDs}},
		{"workspace", "ws-2", base},
		{"anchor", "ws-1", Draft{Kind: KindMitigation, Title: base.Title, EvidenceIDs: []int64{7, 9}}},
	}
	for _, tt := range differ {
		t.Run("differs/"+tt.name, func(t *testing.T) {
			if got := Fingerprint(tt.ws, tt.d); got == fp {
				t.Fatalf("Fingerprint did not change with %s", tt.name)
			}
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"one ascii", "a", 1},
		{"four ascii", "abcd", 1},
		{"five ascii", "abcde", 2},
		{"english sentence", "rolled back checkout to v1.2.3", 8},
		{"chinese", "已回滚", 3},
		{"mixed", "回滚 v1.2", 2 + 2},
		{"full-width punctuation", "好的！", 3},
		{"emoji", "👍", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateTokens(tt.in); got != tt.want {
				t.Fatalf("EstimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
	t.Run("conservative for CJK", func(t *testing.T) {
		s := strings.Repeat("支付服务报错率上升，已定位到数据库连接池耗尽。", 20)
		if got, runes := EstimateTokens(s), len([]rune(s)); got < runes {
			t.Fatalf("EstimateTokens = %d for %d CJK runes; a CJK estimate must not be below one per rune", got, runes)
		}
	})
	t.Run("message and entry overheads", func(t *testing.T) {
		m := Message{Text: "abcd", SenderName: "Al"}
		if got := EstimateMessageTokens(m); got != 1+1+MessageOverheadTokens {
			t.Fatalf("EstimateMessageTokens = %d", got)
		}
		if got := EstimateEntryTokens(ExistingEntry{Title: "abcdefgh"}); got != 2+EntryOverheadTokens {
			t.Fatalf("EstimateEntryTokens = %d", got)
		}
	})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestIsRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", fmt.Errorf("calling model: %w", ErrUnavailable), true},
		{"invalid output", fmt.Errorf("x: %w", ErrInvalidOutput), true},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"net timeout", fmt.Errorf("x: %w", timeoutErr{}), true},
		{"rejected", fmt.Errorf("HTTP 401: %w", ErrRejected), false},
		{"invalid request", fmt.Errorf("x: %w", ErrInvalidRequest), false},
		{"canceled", context.Canceled, false},
		{"canceled while unavailable", fmt.Errorf("%w: %w", ErrUnavailable, context.Canceled), false},
		{"unknown", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsRetryable(tt.err); got != tt.want {
				t.Fatalf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestKinds(t *testing.T) {
	all := Kinds()
	if len(all) != 9 {
		t.Fatalf("Kinds() has %d kinds", len(all))
	}
	for i, k := range all {
		if k.Rank() != i || !k.Valid() {
			t.Errorf("kind %q: rank %d valid %v", k, k.Rank(), k.Valid())
		}
		if got, err := ParseKind(string(k)); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	all[0] = "mutated"
	if Kinds()[0] != KindImpact {
		t.Fatal("Kinds() returned shared storage")
	}
	if _, err := ParseKind("Impact"); !errors.Is(err, ErrInvalidOutput) {
		t.Fatalf("ParseKind(Impact) = %v", err)
	}
	if Kind("x").Rank() != -1 {
		t.Fatal("unknown kind has a rank")
	}
}
