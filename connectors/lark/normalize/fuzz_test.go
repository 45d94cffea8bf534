package normalize

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var placeholderRE = regexp.MustCompile(`@_user_[0-9]|@_all`)

// FuzzNormalize checks the invariants of Normalize on arbitrary content: it never
// panics; a rejection always has a known reason; an accepted message has bounded,
// clean, valid UTF-8 text, whitelisted metadata, a deterministic hash, no mention
// placeholders in text messages, and redacts to a different hash.
func FuzzNormalize(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "content_*.json"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed samples: %v", err)
	}
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		typ := strings.TrimPrefix(filepath.Base(path), "content_")
		typ = typ[:strings.Index(typ, "_")]
		if typ == "merge" {
			typ = "merge_forward"
		}
		f.Add(typ, string(b), "Tom")
	}
	for _, s := range []struct{ typ, content string }{
		{"text", `{"text":"@_user_1@_user_12@_all @_ @_user_ x"}`},
		{"text", "{\"text\":\"\\u0000\\r\\n\xff 中文\"}"},
		{"post", `{"zh_cn":{"title":"t","content":[[{"tag":"code_block","text":"x"}]]},"en_us":1}`},
		{"post", `{"post":{"post":{}}}`},
		{"system", `{"template":"{a}{b}{","a":[1,"x"],"b":{"text":"y"}}`},
		{"todo", `{"summary":{"zh_cn":{"content":[[{"tag":"at","user_id":"@_user_1"}]]}},"due_time":"9"}`},
		{"merge_forward", `not json`},
		{"vote", `{"options":[true,null,1.5],"status":"1"}`},
	} {
		f.Add(s.typ, s.content, "Tom")
	}
	f.Add("text", `{"text":"@_user_1"}`, "\x00\u2028@")

	const maxText = 64
	n, err := New(Options{SelfAppID: testSelfAppID, MaxTextBytes: maxText, MaxContentBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, messageType, content, mentionName string) {
		in := groupInput(messageType, content)
		in.Mentions = []Mention{{Key: "@_user_1", OpenID: "ou_m1", Name: mentionName}}
		m, err := n.Normalize(in)
		if err != nil {
			if r := Reason(err); r == ReasonNone || r == ReasonOther {
				t.Fatalf("rejection without a known reason: %v", err)
			}
			return
		}
		if !utf8.ValidString(m.Text) || len(m.Text) > maxText {
			t.Fatalf("text invalid or too long (%d bytes): %q", len(m.Text), m.Text)
		}
		if m.Text != strings.TrimFunc(m.Text, unicode.IsSpace) {
			t.Fatalf("text not trimmed: %q", m.Text)
		}
		for _, r := range m.Text {
			if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
				t.Fatalf("control character %U in %q", r, m.Text)
			}
		}
		if messageType == "text" && !strings.Contains(mentionName, "@_") && placeholderRE.MatchString(m.Text) {
			t.Fatalf("placeholder left in %q", m.Text)
		}
		if len(m.ContentHash) != 64 {
			t.Fatalf("hash %q", m.ContentHash)
		}
		checkWhitelisted(t, m.Metadata)
		for k, v := range m.Metadata {
			switch v := v.(type) {
			case string:
				if !utf8.ValidString(v) {
					t.Fatalf("metadata %q not UTF-8", k)
				}
			case []string:
				if len(v) > maxListItems {
					t.Fatalf("metadata %q has %d items", k, len(v))
				}
			}
		}
		again, err := n.Normalize(in)
		if err != nil || again.ContentHash != m.ContentHash || again.Text != m.Text {
			t.Fatalf("not deterministic: %v", err)
		}
		r := Redact(m, m.UpdatedAt)
		if r.Text != "" || !r.Deleted || r.ContentHash == m.ContentHash || Redact(r, r.UpdatedAt).ContentHash != r.ContentHash {
			t.Fatalf("bad redaction %+v", r)
		}
	})
}
