package normalize

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// adversarialInputs are content shapes that would cost superlinear time or unbounded
// memory in a careless renderer, each about size bytes.
func adversarialInputs(size int) map[string]Input {
	longName := groupInput("text", `{"text":"`+strings.Repeat("@_user_1", size/8)+`"}`)
	longName.Mentions = []Mention{{Key: "@_user_1", OpenID: "ou_x", Name: strings.Repeat("N", 10*maxNameBytes)}}
	depth := min(size/8, 5000) // encoding/json rejects nesting deeper than 10000
	return map[string]Input{
		"nested post wrappers":     groupInput("post", strings.Repeat(`{"post":`, depth)+"{}"+strings.Repeat("}", depth)),
		"placeholders, long name":  longName,
		"one long space run":       groupInput("text", `{"text":"a`+strings.Repeat(" ", size)+`b"}`),
		"unclosed braces":          groupInput("system", `{"template":"`+strings.Repeat("{", size)+`"}`),
		"repeated variable":        groupInput("system", `{"template":"`+strings.Repeat("{a}", size/3)+`","a":["x","y"]}`),
		"many images":              groupInput("post", `{"content":[[`+strings.Repeat(`{"tag":"img","image_key":"img_1"},`, size/34)+`{}]]}`),
		"many empty paragraphs":    groupInput("post", `{"content":[`+strings.Repeat(`[],`, size/3)+`[]]}`),
		"many legacy forwards ids": groupInput("merge_forward", `{"create_message_ids":[`+strings.Repeat(`"om_1",`, size/7)+`"om_2"]}`),
	}
}

func TestAdversarialInputsStayBounded(t *testing.T) {
	n := newTestNormalizer(t)
	for name, in := range adversarialInputs(128 << 10) {
		t.Run(name, func(t *testing.T) {
			m, err := n.Normalize(in)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if len(m.Text) > DefaultMaxTextBytes || !utf8.ValidString(m.Text) {
				t.Errorf("text of %d bytes", len(m.Text))
			}
			for k, v := range m.Metadata {
				if list, ok := v.([]string); ok && len(list) > maxListItems {
					t.Errorf("metadata %q has %d items", k, len(list))
				}
			}
			if strings.Contains(m.Text, strings.Repeat("N", maxNameBytes+1)) {
				t.Error("mention name not bounded")
			}
		})
	}
}

func BenchmarkNormalizeAdversarial(b *testing.B) {
	n := newTestNormalizer(b)
	for name, in := range adversarialInputs(DefaultMaxContentBytes - 1024) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in.Content)))
			for b.Loop() {
				if _, err := n.Normalize(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
